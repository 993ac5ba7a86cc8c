//go:build !unix

package tlsfiles

import "os"

// inode is 0 where the platform has none to offer: size and modification time decide.
func inode(os.FileInfo) uint64 { return 0 }
