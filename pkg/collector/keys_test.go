package collector

import (
	"testing"
)

func TestKeyIndex(t *testing.T) {
	a := &Source{Name: "a", WriteKey: "wk_live_0123456789abcdef"}
	b := &Source{Name: "b", WriteKey: "wk_web"}
	k := keyIndex{}
	for _, s := range []*Source{a, b} {
		if _, dup := k.add(s); dup {
			t.Fatal("dup")
		}
	}
	if other, dup := k.add(&Source{Name: "c", WriteKey: "wk_web"}); !dup || other != b {
		t.Errorf("a shared key not reported: %v %v", other, dup)
	}
	for key, want := range map[string]*Source{
		"wk_live_0123456789abcdef": a, "wk_web": b,
		"": nil, "wk_live_0123456789abcdeF": nil, "wk_live_0123456789abcde": nil, "wk_we": nil, "wk_web ": nil,
	} {
		if got := k.source(key); got != want {
			t.Errorf("source(%q) = %v, want %v", key, got, want)
		}
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"", "", true}, {"x", "x", true}, {"x", "y", false}, {"xy", "x", false}, {"abc", "abd", false}} {
		if got := sameKey(tc.a, tc.b); got != tc.want {
			t.Errorf("sameKey(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func BenchmarkKeyLookup(b *testing.B) {
	k := keyIndex{}
	k.add(&Source{Name: "a", WriteKey: "wk_live_0123456789abcdef0123456789"})
	b.ReportAllocs()
	for b.Loop() {
		if k.source("wk_live_0123456789abcdef0123456789") == nil {
			b.Fatal("not found")
		}
	}
}
