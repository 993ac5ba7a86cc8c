package dirty

import (
	"net/http"
	"os"
	clock "time"
	"unsafe"
)

var _ = unsafe.Sizeof(0)
var _ = http.MethodGet

func f() {
	go os.Exit(0)
	_ = clock.Now()
	clock.Sleep(clock.Duration(0))
}
