package message

import (
	"encoding/json"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// Enabled decides, per spec 4.3, whether a message whose integrations
// object is raw goes to destination: every destination is on by default;
// "All": false turns off each one not named; a destination's own key wins.
// Keys are case sensitive. A key set to an object (per-destination options)
// counts as on. Anything that is not a JSON object leaves the default.
func Enabled(raw json.RawMessage, destination string) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return true
	}
	o, err := rawjson.ParseObject(raw)
	if err != nil {
		return true
	}
	if v, ok := o.Get(destination); ok {
		return string(v) != "false"
	}
	if v, ok := o.Get("All"); ok {
		return string(v) != "false"
	}
	return true
}
