// Package audience is the logic of audience and computed-trait syncs
// (spec section 6): the snake_case trait name, the streaming reader of a
// sync list, and the identify message a change becomes. The diff itself
// is the store's (store.Admin.Sync), so that a list of any size is
// compared inside the database.
package audience

import (
	"strings"
	"unicode"
)

// SnakeCase is the trait name of an audience or computed trait:
//
//   - words are runs of letters, digits and combining marks; every other
//     character (space, punctuation, symbol) separates words, and words
//     are joined by one "_": "VIP-Users (EU)" → "vip_users_eu";
//   - apostrophes are dropped inside a word: "Ada's Fans" → "adas_fans";
//   - a capital starts a new word after a lowercase letter ("HighValue" →
//     "high_value"), and at the end of a run of capitals or digits when a
//     lowercase letter follows ("HTMLParser" → "html_parser",
//     "Top10Users" → "top10_users"); digits otherwise stay in their word
//     ("3D Printers" → "3d_printers", "Q3 Buyers" → "q3_buyers");
//   - letters are lowercased with Unicode rules and otherwise kept:
//     "Élite Käufer" → "élite_käufer", "Straße" → "straße", "高价值 用户" →
//     "高价值_用户". Nothing is transliterated (lossless: "Müller" and
//     "Muller" stay apart), and the name is not Unicode-normalised, so
//     send names in one normal form (NFC);
//   - a leading digit is kept ("2024 Buyers" → "2024_buyers"): a JSON key
//     may start with one.
//
// A name with no letter or digit gives "".
func SnakeCase(name string) string {
	rs := []rune(name)
	var b strings.Builder
	b.Grow(len(name))
	sep := false // a separator was seen since the last word rune
	for i, r := range rs {
		if r == '\'' || r == '’' {
			continue
		}
		if !isWord(r) {
			sep = true
			continue
		}
		if !sep && i > 0 && unicode.IsUpper(r) {
			p := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			sep = unicode.IsLower(p) || (unicode.IsUpper(p) || unicode.IsDigit(p)) && nextLower
		}
		if sep && b.Len() > 0 {
			b.WriteByte('_')
		}
		sep = false
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func isWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.In(r, unicode.Mn, unicode.Mc)
}
