package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Validation follows actions-core's validate: a directive object has one
// @-key (and at most a _metadata beside it), each directive's options have
// the fields and types it names, and plain objects are checked all the way
// down. It does not look inside arrays, nor inside an object that is a
// value (@literal's, @if's then): those are only resolved at Apply, where a
// bad directive in them is an Apply error, as it is in Segment.

// ValidationError is a mapping Parse refused: where, and why.
type ValidationError struct {
	Path []string // keys and directive names from the mapping's root
	Msg  string
}

func (e *ValidationError) Error() string { return pathString(e.Path) + ": " + e.Msg }

// pathString writes a path as mapping.user.email, quoting keys that are not
// plain names: mapping["a.b"].@path.
func pathString(path []string) string {
	var b strings.Builder
	b.WriteString("mapping")
	for _, p := range path {
		if plainKey(p) {
			b.WriteByte('.')
			b.WriteString(p)
			continue
		}
		q, _ := json.Marshal(p)
		b.WriteByte('[')
		b.Write(q)
		b.WriteByte(']')
	}
	return b.String()
}

func plainKey(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case c == '@' && i == 0:
		case c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

type validator func(v value, stack []string) error

func vfail(stack []string, format string, args ...any) error {
	return &ValidationError{Path: append([]string(nil), stack...), Msg: fmt.Sprintf(format, args...)}
}

func push(stack []string, s string) []string {
	return append(stack[:len(stack):len(stack)], s)
}

// typeName is realTypeOrDirective.
func typeName(v value) string {
	switch v.k {
	case kUndef:
		return "undefined"
	case kNull:
		return "null"
	case kBool:
		return "boolean"
	case kNum:
		return "number"
	case kStr:
		return "string"
	case kArr:
		return "array"
	}
	for _, m := range v.members() {
		if strings.HasPrefix(m.key, "@") {
			return "directive"
		}
	}
	return "object"
}

func article(s string) string {
	switch s[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + s
	}
	return "a " + s
}

// isDirectiveObject is mapping-kit's isDirective: an object with an @-key
// and no key other than @-keys and _metadata.
func isDirectiveObject(v value) bool {
	if v.k != kObj {
		return false
	}
	has := false
	for _, m := range v.members() {
		switch {
		case strings.HasPrefix(m.key, "@"):
			has = true
		case m.key != "_metadata":
			return false
		}
	}
	return has
}

func validate(v value, stack []string) error {
	switch typeName(v) {
	case "directive":
		return validateDirective(v, stack)
	case "object":
		return validateObject(v, stack)
	case "array":
		return validateArray(v, stack)
	}
	return nil
}

func validateDirective(v value, stack []string) error {
	if v.k != kObj {
		return vfail(stack, "should be a directive object but it is %s", article(typeName(v)))
	}
	ms := v.members()
	var names []string
	for _, m := range ms {
		if strings.HasPrefix(m.key, "@") {
			names = append(names, m.key)
		}
	}
	if len(names) > 1 {
		return vfail(stack, "should have only one @-prefixed key but it has %d (%s)", len(names), strings.Join(names, ", "))
	}
	for _, m := range ms {
		if !strings.HasPrefix(m.key, "@") && m.key != "_metadata" {
			return vfail(stack, "a directive object should have only its @-prefixed key but it also has %q", m.key)
		}
	}
	fn, ok := directiveValidators[names[0]]
	if !ok {
		return vfail(stack, "%s is not a directive", names[0])
	}
	return fn(v.get(names[0]), push(stack, names[0]))
}

func validateDirectiveOrRaw(v value, stack []string) error {
	switch t := typeName(v); t {
	case "directive":
		return validateDirective(v, stack)
	case "undefined":
		return vfail(stack, "should be a mapping directive or a JSON value but it is %s", article(t))
	}
	return nil
}

func validateDirectiveOrString(v value, stack []string) error {
	switch t := typeName(v); t {
	case "directive":
		return validateDirective(v, stack)
	case "string":
		return nil
	default:
		return vfail(stack, "should be a string or a mapping directive but it is %s", article(t))
	}
}

func validateDirectiveOrObject(v value, stack []string) error {
	switch t := typeName(v); t {
	case "directive":
		return validateDirective(v, stack)
	case "object":
		return validateObject(v, stack)
	default:
		return vfail(stack, "should be an object or a mapping directive but it is %s", article(t))
	}
}

func validateString(v value, stack []string) error {
	if t := typeName(v); t != "string" {
		return vfail(stack, "should be a string but it is %s", article(t))
	}
	return nil
}

func validateBoolean(v value, stack []string) error {
	if t := typeName(v); t != "boolean" {
		return vfail(stack, "should be a boolean but it is %s", article(t))
	}
	return nil
}

func validateArray(v value, stack []string) error {
	if t := typeName(v); t != "array" {
		return vfail(stack, "should be an array but it is %s", article(t))
	}
	return nil
}

func validateStringLength(min, max int) validator {
	return func(v value, stack []string) error {
		n := utf16Len(v.str(nil))
		if n < min {
			return vfail(stack, "should be a string of length %d or more", min)
		}
		if n > max {
			return vfail(stack, "should be a string of length %d or less", max)
		}
		return nil
	}
}

func validateAllowedStrings(allowed ...string) validator {
	return func(v value, stack []string) error {
		if err := validateString(v, stack); err != nil {
			return err
		}
		s := string(v.str(nil))
		for _, a := range allowed {
			if jsLower(s) == a {
				return nil
			}
		}
		return vfail(stack, "should be one of %s but it is %q", strings.Join(allowed, ", "), s)
	}
}

func chain(vs ...validator) validator {
	return func(v value, stack []string) error {
		for _, f := range vs {
			if err := f(v, stack); err != nil {
				return err
			}
		}
		return nil
	}
}

func validateObject(v value, stack []string) error {
	if t := typeName(v); t != "object" {
		return vfail(stack, "should be an object but it is %s", article(t))
	}
	var errs []error
	for _, m := range v.members() {
		if err := validate(m.v, push(stack, m.key)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

type field struct {
	name     string
	required bool
	check    validator
}

func validateFields(v value, stack []string, fields ...field) error {
	if err := validateObject(v, stack); err != nil {
		return err
	}
	var errs []error
	for _, f := range fields {
		fv := v.get(f.name)
		if fv.k == kUndef {
			if f.required {
				errs = append(errs, vfail(stack, "should have field %q but it doesn't", f.name))
			}
			continue
		}
		if err := f.check(fv, push(stack, f.name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var directiveValidators map[string]validator

func init() {
	directiveValidators = map[string]validator{
		"@if": func(v value, s []string) error {
			return validateFields(v, s,
				field{"exists", false, validateDirectiveOrRaw},
				field{"then", false, validateDirectiveOrRaw},
				field{"else", false, validateDirectiveOrRaw})
		},
		"@case": func(v value, s []string) error {
			return validateFields(v, s,
				field{"operator", false, validateString},
				field{"value", false, validateDirectiveOrString})
		},
		"@replace": func(v value, s []string) error {
			return validateFields(v, s,
				field{"pattern", true, chain(validateString, validateStringLength(1, maxPattern))},
				field{"replacement", false, chain(validateString, validateStringLength(0, maxReplacement))},
				field{"value", true, validateDirectiveOrString},
				field{"ignorecase", false, validateBoolean},
				field{"global", false, validateBoolean})
		},
		"@arrayPath": func(v value, s []string) error {
			if err := validateArray(v, s); err != nil {
				return err
			}
			if err := validateDirectiveOrString(v.get("0"), s); err != nil {
				return err
			}
			return validate(v.get("1"), s)
		},
		"@path":     validateDirectiveOrString,
		"@template": validateDirectiveOrString,
		"@json": func(v value, s []string) error {
			return validateFields(v, s,
				field{"value", true, validateDirectiveOrRaw},
				field{"mode", true, validateAllowedStrings("encode", "decode")})
		},
		"@flatten": func(v value, s []string) error {
			return validateFields(v, s,
				field{"separator", false, validateString},
				field{"value", true, validateDirectiveOrRaw})
		},
		"@merge": func(v value, s []string) error {
			if err := validateFields(v, s,
				field{"direction", false, validateAllowedStrings("left", "right")},
				field{"objects", true, validateArray}); err != nil {
				return err
			}
			for j, o := range v.get("objects").elems() {
				// Segment checks these with no path; evfwd gives theirs.
				if err := validateDirectiveOrObject(o, push(push(s, "objects"), fmt.Sprint(j))); err != nil {
					return err
				}
			}
			return nil
		},
		"@literal": validateDirectiveOrRaw,
		"@transform": func(v value, s []string) error {
			return validateFields(v, s,
				field{"apply", true, validateDirectiveOrObject},
				field{"mapping", true, validateDirectiveOrObject})
		},
		"@excludeWhenNull": validateDirectiveOrRaw,
		"@liquid":          validateString,
	}
}
