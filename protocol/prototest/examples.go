package prototest

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// Example is one frame example of SPEC.md: a ```frame NAME block.
type Example struct {
	Name  string // the frame type's name
	Line  int    // the line of the block's opening fence
	Bytes []byte
}

// ParseFrameExamples reads the ```frame NAME blocks of SPEC.md's text: hex tokens, with
// everything after '#' on a line a comment.
func ParseFrameExamples(spec string) ([]Example, error) {
	var out []Example
	var cur *Example
	for i, line := range strings.Split(spec, "\n") {
		n := i + 1
		switch {
		case strings.HasPrefix(line, "```frame "):
			cur = &Example{Name: strings.TrimSpace(strings.TrimPrefix(line, "```frame ")), Line: n}
		case cur != nil && strings.HasPrefix(line, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			if c := strings.IndexByte(line, '#'); c >= 0 {
				line = line[:c]
			}
			for _, tok := range strings.Fields(line) {
				b, err := hex.DecodeString(tok)
				if err != nil {
					return nil, &exampleError{"line " + strconv.Itoa(n) + ": " + strconv.Quote(tok) + " is not hex"}
				}
				cur.Bytes = append(cur.Bytes, b...)
			}
		}
	}
	if cur != nil {
		return nil, &exampleError{"the block opened at line " + strconv.Itoa(cur.Line) + " is not closed"}
	}
	return out, nil
}

type exampleError struct{ msg string }

func (e *exampleError) Error() string { return "SPEC.md frame examples: " + e.msg }

// Hex decodes hex written with spaces, for hand-written frames and bodies. It panics on
// malformed hex: test data is written by hand, so that is a defect of the test.
func Hex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic("prototest.Hex: " + err.Error())
	}
	return b
}

// Cat concatenates byte slices into a new one.
func Cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
