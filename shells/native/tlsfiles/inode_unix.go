//go:build unix

package tlsfiles

import (
	"os"
	"syscall"
)

// inode is a file's inode number: a file replaced by a rename (how secrets are rotated
// in place) may keep its size and modification time, never its inode.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
