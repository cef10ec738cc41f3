package audience

import "testing"

func TestSnakeCase(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"High Value Users", "high_value_users"},
		{"VIP-Users (EU)", "vip_users_eu"},
		{"high_value_users", "high_value_users"},
		{"  Leading and trailing  ", "leading_and_trailing"},
		{"Many   spaces\tand\ttabs", "many_spaces_and_tabs"},
		{"HighValue", "high_value"},
		{"highValueUsers", "high_value_users"},
		{"HTMLParser Fans", "html_parser_fans"},
		{"VIP", "vip"},
		{"Top 10 Users", "top_10_users"},
		{"Top10Users", "top10_users"},
		{"3D Printers", "3d_printers"},
		{"Q3 Buyers", "q3_buyers"},
		{"2024 Buyers", "2024_buyers"},
		{"Ada's Fans", "adas_fans"},
		{"Ada’s Fans", "adas_fans"},
		{"Cart: Abandoned!!", "cart_abandoned"},
		{"a.b/c@d", "a_b_c_d"},
		{"Users w/ >5 orders", "users_w_5_orders"},
		{"Élite Käufer", "élite_käufer"},
		{"Straße", "straße"},
		{"ÜBER Fans", "über_fans"},
		{"e\u0301lite", "e\u0301lite"}, // a combining mark stays in its word
		{"高价值 用户", "高价值_用户"},
		{"Клиенты VIP", "клиенты_vip"},
		{"emoji 🚀 launch", "emoji_launch"},
		{"!!!", ""},
		{"", ""},
	} {
		if got := SnakeCase(tt.in); got != tt.want {
			t.Errorf("SnakeCase(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
