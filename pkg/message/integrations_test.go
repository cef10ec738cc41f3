package message

import "testing"

func TestEnabled(t *testing.T) {
	tests := []struct {
		integrations string
		want         bool
	}{
		{``, true},
		{`null`, true},
		{`{}`, true},
		{`{"Webhooks":false}`, false},
		{`{"Webhooks":true}`, true},
		{`{"All":false}`, false},
		{`{"All":false,"Webhooks":true}`, true},
		{`{"All":false,"Webhooks":{"opt":1}}`, true},
		{`{"All":true,"Webhooks":false}`, false},
		{`{"webhooks":false}`, true}, // keys are case sensitive
		{`{"Amplitude":false}`, true},
	}
	for _, tt := range tests {
		if got := Enabled([]byte(tt.integrations), "Webhooks"); got != tt.want {
			t.Errorf("Enabled(%s) = %v, want %v", tt.integrations, got, tt.want)
		}
	}
}
