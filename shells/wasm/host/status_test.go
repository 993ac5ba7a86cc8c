package host_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"plait/protocol/abi"
)

// TestStatusIsRead: the host's Session answers from every field of the guest's STATUS
// (abi.StatusMsg) but those listed here, so a field added to the status is not carried by
// the guest for nothing. The check reads session.go: the fields it reads as st.Field.
func TestStatusIsRead(t *testing.T) {
	unread := map[string]string{
		"Configured": "a host's Session exists only once CONFIGURE succeeded",
		"Connected":  "Connected(now) answers for any time from keys 2, 5, 12, 13 and 20, not as of the last command",
		"MinVersion": "the advertised range is not part of replica.Session; the release tests read it from the record",
		"MaxVersion": "as MinVersion",
	}
	f, err := parser.ParseFile(token.NewFileSet(), "session.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if inner, ok := sel.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "st" {
				read[sel.Sel.Name] = true
			}
		}
		return true
	})
	for i := range reflect.TypeFor[abi.StatusMsg]().NumField() {
		name := reflect.TypeFor[abi.StatusMsg]().Field(i).Name
		switch _, listed := unread[name]; {
		case !read[name] && !listed:
			t.Errorf("the host's Session never reads StatusMsg.%s: answer from it, or list it here with the reason", name)
		case read[name] && listed:
			t.Errorf("StatusMsg.%s is read, and listed as unread", name)
		}
	}
}
