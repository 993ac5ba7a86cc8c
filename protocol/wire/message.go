package wire

// Decoded is one frame of a message with its decoded body. Value is nil for an unknown
// ignorable frame, which a receiver skips.
type Decoded struct {
	Frame
	Value Body
}

// DecodeMessage decodes every frame of one message, checking the message limits, each
// header and each body. It returns the frames decoded before the first error, and that
// error, which names the frame type, the frame's byte offset and the class.
func DecodeMessage(msg []byte, maxMessage int, maxBody uint32) ([]Decoded, *Error) {
	if err := CheckMessage(msg, maxMessage); err != nil {
		return nil, err
	}
	var out []Decoded
	r := NewReader(msg, maxBody)
	for r.More() {
		f, err := r.Next()
		if err != nil {
			return out, err
		}
		if !Known(f.Type) {
			if f.Type.Ignorable() {
				out = append(out, Decoded{Frame: f})
				continue
			}
			return out, FrameError(CodeUnknownFrame, f.Type, f.Offset, "unknown critical frame type")
		}
		v, err := DecodeBody(f)
		if err != nil {
			return out, err
		}
		out = append(out, Decoded{Frame: f, Value: v})
	}
	return out, nil
}

// EncodeMessage encodes frames into one message: each header as given (its length is
// recomputed) and each body from its value, or verbatim when the value is nil.
func EncodeMessage(frames []Decoded) ([]byte, error) {
	var out []byte
	for _, d := range frames {
		var err error
		if d.Value == nil {
			h := d.Header
			h.Length = uint32(len(d.Body))
			out = AppendHeader(out, h)
			out = append(out, d.Body...)
			continue
		}
		if out, err = AppendFrame(out, d.Flags, d.Channel, d.Value); err != nil {
			return nil, err
		}
	}
	return out, nil
}
