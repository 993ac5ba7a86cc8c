module plait

go 1.26

require (
	github.com/cockroachdb/datadriven v1.0.3
	github.com/coder/websocket v1.8.15
	github.com/fxamacker/cbor/v2 v2.10.0
	github.com/leanovate/gopter v0.2.11
	github.com/linxGnu/grocksdb v1.7.14
	github.com/tetratelabs/wazero v1.12.0
)

require (
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/sys v0.44.0 // indirect
)
