package message

import (
	"encoding/json"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// The Object form of a Raw: the input parsed into a rawjson.Object, for
// everything the spliced form does not cover (see Raw). unsplice is the one
// way from the spliced form to this one; nothing goes back.

// appendObject is AppendJSON for the Object form.
func (r *Raw) appendObject(dst []byte, lib json.RawMessage) ([]byte, error) {
	if lib == nil {
		return r.obj.AppendJSON(dst), nil
	}
	dst = append(dst, '{')
	wroteContext := false
	for i, f := range r.obj.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = rawjson.AppendString(dst, f.Key)
		dst = append(dst, ':')
		if f.Key != "context" {
			dst = append(dst, f.Value...)
			continue
		}
		wroteContext = true
		if isNull(f.Value) {
			dst = appendLibraryOnly(dst, lib)
			continue
		}
		var err error
		if dst, err = rawjson.AppendWithMember(dst, f.Value, "library", lib); err != nil {
			return dst, &ValidationError{Type: r.typ, Field: "context", Reason: "must be an object"}
		}
	}
	if !wroteContext {
		if len(r.obj.Fields) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"context":`...)
		dst = appendLibraryOnly(dst, lib)
	}
	return append(dst, '}'), nil
}

// Object is the message's members; changes to it are not re-validated
// until Validate is called.
func (r *Raw) Object() *rawjson.Object {
	if r.obj == nil {
		r.unsplice()
	}
	r.checked = false
	return r.obj
}

// unsplice moves a spliced Raw to the Object form, edits included; a Raw
// that holds no message gets an empty Object.
func (r *Raw) unsplice() {
	r.obj = &r.own
	if r.sp.data == nil {
		return
	}
	if err := r.own.Parse(r.sp.data); err != nil {
		panic("message: the bytes a Raw was parsed from changed: " + err.Error())
	}
	// The order Fill uses, so that added members land where they would.
	if r.sp.id != nil {
		r.obj.Set("messageId", r.sp.id)
	}
	if r.sp.ts != nil {
		r.obj.Set("timestamp", r.sp.ts)
	}
}

func appendLibraryOnly(dst []byte, lib json.RawMessage) []byte {
	dst = append(dst, `{"library":`...)
	dst = append(dst, lib...)
	return append(dst, '}')
}
