package abi_test

import (
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/replica"
)

// abiCommands reads the table of commands of shells/wasm/ABI.md ("Input: commands"): each
// opcode and the session call its last column names.
func abiCommands(t *testing.T) map[abi.Op]string {
	t.Helper()
	doc, err := os.ReadFile("../../shells/wasm/ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	start := strings.Index(s, "### Input: commands")
	if start < 0 {
		t.Fatal("shells/wasm/ABI.md has no section Input: commands")
	}
	s = s[start:]
	if end := strings.Index(s[1:], "\n### "); end > 0 {
		s = s[:end+1]
	}
	row := regexp.MustCompile("(?m)^\\| `0x([0-9A-F]{2})` \\| [A-Z-]+ \\| .* \\| (.*) \\|$")
	out := map[abi.Op]string{}
	for _, m := range row.FindAllStringSubmatch(s, -1) {
		op, _ := strconv.ParseUint(m[1], 16, 8)
		out[abi.Op(op)] = m[2]
	}
	if len(out) == 0 {
		t.Fatal("no command in shells/wasm/ABI.md's table")
	}
	return out
}

// TestCommandTable: a session command is one protocol method, one row of commands.go and
// its opcode, with its line in the table of commands of shells/wasm/ABI.md: every opcode
// there but the driver's own (CONFIGURE, DECODE, READY) has a row and every row is there,
// and every command method of the session (one whose last result is an error:
// replica.Session's own and those of V1, V2, V3 and V4) is the session call of an opcode
// there.
func TestCommandTable(t *testing.T) {
	doc := abiCommands(t)
	own := map[abi.Op]bool{abi.OpConfigure: true, abi.OpDecode: true, abi.OpReady: true}
	for op := range 256 {
		op := abi.Op(op)
		_, documented := doc[op]
		switch {
		case own[op] && abi.HasRow(op):
			t.Errorf("op 0x%02x is the driver's own and has a row", uint8(op))
		case abi.HasRow(op) && !documented:
			t.Errorf("op 0x%02x has a row in commands.go and no line in shells/wasm/ABI.md's table of commands", uint8(op))
		case documented && !own[op] && !abi.HasRow(op):
			t.Errorf("op 0x%02x is in shells/wasm/ABI.md's table of commands and has no row in commands.go", uint8(op))
		}
	}
	calls := map[string]bool{} // every call shells/wasm/ABI.md names, as "V2().Ack"
	call := regexp.MustCompile("^`((?:V[0-9]\\(\\)\\.)?[A-Za-z]+)\\(")
	for op, c := range doc {
		m := call.FindStringSubmatch(c)
		if !own[op] && m == nil {
			t.Errorf("op 0x%02x: shells/wasm/ABI.md names no session call: %s", uint8(op), c)
			continue
		}
		if m != nil {
			calls[m[1]] = true
		}
	}
	errType := reflect.TypeFor[error]()
	methods := func(prefix string, iface reflect.Type) {
		for i := range iface.NumMethod() {
			m := iface.Method(i)
			if n := m.Type.NumOut(); n == 0 || m.Type.Out(n-1) != errType {
				continue // a query, or the version's commands (V1, V2, V3, V4)
			}
			if name := prefix + m.Name; !calls[name] {
				t.Errorf("%s is a command of the session and no opcode of shells/wasm/ABI.md's table calls it: "+
					"give it an Op, a row in commands.go and its line in the table", name)
			} else {
				delete(calls, name)
			}
		}
	}
	methods("", reflect.TypeFor[replica.Session]())
	methods("V1().", reflect.TypeFor[protocol.V1Commands]())
	methods("V2().", reflect.TypeFor[protocol.V2Commands]())
	methods("V3().", reflect.TypeFor[protocol.V3Commands]())
	methods("V4().", reflect.TypeFor[protocol.V4Commands]())
	delete(calls, "Ready") // READY: the driver's own
	for name := range calls {
		t.Errorf("shells/wasm/ABI.md's table of commands calls %s, which is no command of the session", name)
	}
}
