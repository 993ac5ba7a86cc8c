package prototest_test

import (
	"bytes"
	"testing"

	"plait/protocol/prototest"
)

func TestParseFrameExamples(t *testing.T) {
	exs, err := prototest.ParseFrameExamples("text\n```frame PING\n# comment 00\n04 00 # tail ff\n0000 0001\n```\n```go\nff\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 1 || exs[0].Name != "PING" || exs[0].Line != 2 || !bytes.Equal(exs[0].Bytes, []byte{4, 0, 0, 0, 0, 1}) {
		t.Fatalf("examples %+v", exs)
	}
	for _, bad := range []string{"```frame X\nzz\n```\n", "```frame X\n00\n"} {
		if _, err := prototest.ParseFrameExamples(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
