package message

import (
	"time"
	"unicode/utf8"
)

// Message is implemented by the six typed messages (by value and by
// pointer). AppendJSON writes the wire form; it does not invent a
// messageId or timestamp: the sender fills those in before encoding.
type Message interface {
	MessageType() Type
	Validate() error
	AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error)
}

// The fields below follow spec 2.4; field names follow the wire keys
// (userId, messageId, ...) the way Segment's Go library spells them.
// Properties, traits, context and integrations hold any JSON-able values;
// *big.Int, *big.Float and *big.Rat are written as strings (spec 4.5).
// A zero Timestamp means "now" and an empty MessageId "make one up";
// both are the sender's job.

// Identify records who a user is and their traits.
type Identify struct {
	UserId       string
	AnonymousId  string
	Traits       map[string]any
	Context      map[string]any
	Integrations map[string]any
	Timestamp    time.Time
	MessageId    string
}

// Track records an action a user performed.
type Track struct {
	UserId       string
	AnonymousId  string
	Event        string
	Properties   map[string]any
	Context      map[string]any
	Integrations map[string]any
	Timestamp    time.Time
	MessageId    string
}

// Page records a web page view.
type Page struct {
	UserId       string
	AnonymousId  string
	Name         string
	Category     string
	Properties   map[string]any
	Context      map[string]any
	Integrations map[string]any
	Timestamp    time.Time
	MessageId    string
}

// Screen records a mobile screen view; its rules are those of Page.
type Screen struct {
	UserId       string
	AnonymousId  string
	Name         string
	Category     string
	Properties   map[string]any
	Context      map[string]any
	Integrations map[string]any
	Timestamp    time.Time
	MessageId    string
}

// Group associates a user with a group (an account, a company).
type Group struct {
	UserId       string
	AnonymousId  string
	GroupId      string
	Traits       map[string]any
	Context      map[string]any
	Integrations map[string]any
	Timestamp    time.Time
	MessageId    string
}

// Alias merges two identities: PreviousId becomes UserId.
type Alias struct {
	UserId       string
	PreviousId   string
	Context      map[string]any
	Integrations map[string]any
	Timestamp    time.Time
	MessageId    string
}

func (Identify) MessageType() Type { return TypeIdentify }
func (Track) MessageType() Type    { return TypeTrack }
func (Page) MessageType() Type     { return TypePage }
func (Screen) MessageType() Type   { return TypeScreen }
func (Group) MessageType() Type    { return TypeGroup }
func (Alias) MessageType() Type    { return TypeAlias }

// Validation messages, shared by typed and raw messages so a user sees the
// same words whichever way a message came in. Fields are named by their
// JSON keys, as the user wrote them in the message.
const (
	fieldIdentity   = "userId or anonymousId"
	fieldUserID     = "userId"
	fieldAnonID     = "anonymousId"
	fieldEvent      = "event"
	fieldName       = "name"
	fieldCategory   = "category"
	fieldGroupID    = "groupId"
	fieldPreviousID = "previousId"
	fieldMessageID  = "messageId"
	fieldType       = "type"
	fieldTimestamp  = "timestamp"

	reasonRequired         = "is required"
	reasonRequiredCategory = "is required when category is set"
)

func checkIdentity(t Type, userID, anonID string) error {
	if userID == "" && anonID == "" {
		return invalid(t, fieldIdentity, reasonRequired)
	}
	return nil
}

func checkMessageID(t Type, id string) error {
	if utf8.RuneCountInString(id) > MaxMessageIDLength {
		return invalid(t, fieldMessageID, "is longer than 100 characters")
	}
	return nil
}

// Validate checks the rules of spec 2.4.
func (m Identify) Validate() error {
	if err := checkIdentity(TypeIdentify, m.UserId, m.AnonymousId); err != nil {
		return err
	}
	return checkMessageID(TypeIdentify, m.MessageId)
}

// Validate checks the rules of spec 2.4.
func (m Track) Validate() error {
	if err := checkIdentity(TypeTrack, m.UserId, m.AnonymousId); err != nil {
		return err
	}
	if m.Event == "" {
		return invalid(TypeTrack, fieldEvent, reasonRequired)
	}
	return checkMessageID(TypeTrack, m.MessageId)
}

// Validate checks the rules of spec 2.4.
func (m Page) Validate() error {
	return validatePageLike(TypePage, m.UserId, m.AnonymousId, m.Name, m.Category, m.MessageId)
}

// Validate checks the rules of spec 2.4 for page, which screen shares.
func (m Screen) Validate() error {
	return validatePageLike(TypeScreen, m.UserId, m.AnonymousId, m.Name, m.Category, m.MessageId)
}

func validatePageLike(t Type, userID, anonID, name, category, id string) error {
	if err := checkIdentity(t, userID, anonID); err != nil {
		return err
	}
	if category != "" && name == "" {
		return invalid(t, fieldName, reasonRequiredCategory)
	}
	return checkMessageID(t, id)
}

// Validate checks the rules of spec 2.4.
func (m Group) Validate() error {
	if err := checkIdentity(TypeGroup, m.UserId, m.AnonymousId); err != nil {
		return err
	}
	if m.GroupId == "" {
		return invalid(TypeGroup, fieldGroupID, reasonRequired)
	}
	return checkMessageID(TypeGroup, m.MessageId)
}

// Validate checks the rules of spec 2.4: alias needs both ids.
func (m Alias) Validate() error {
	if m.UserId == "" {
		return invalid(TypeAlias, fieldUserID, reasonRequired)
	}
	if m.PreviousId == "" {
		return invalid(TypeAlias, fieldPreviousID, reasonRequired)
	}
	return checkMessageID(TypeAlias, m.MessageId)
}
