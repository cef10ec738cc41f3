package message

// Type is the kind of a message, its "type" field on the wire.
type Type string

// The message types of spec 2.4 (screen is the mobile counterpart of page).
const (
	TypeIdentify Type = "identify"
	TypeTrack    Type = "track"
	TypePage     Type = "page"
	TypeScreen   Type = "screen"
	TypeGroup    Type = "group"
	TypeAlias    Type = "alias"
)

// Types lists every message type in a stable order.
var Types = []Type{TypeIdentify, TypeTrack, TypePage, TypeScreen, TypeGroup, TypeAlias}

// Valid reports whether t is one of the six message types.
func (t Type) Valid() bool {
	switch t {
	case TypeIdentify, TypeTrack, TypePage, TypeScreen, TypeGroup, TypeAlias:
		return true
	}
	return false
}
