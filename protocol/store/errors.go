package store

import "fmt"

// errorf makes an error of this package: fmt.Errorf with the package's prefix, so %w wraps.
func errorf(format string, args ...any) error {
	return fmt.Errorf("store: "+format, args...)
}
