package signature

import (
	"net/http"
	"testing"
)

// FuzzParse feeds untrusted header values to every scheme's parser and to
// detection: no panic, and a candidate without an early verdict holds
// signatures of the scheme's MAC size.
func FuzzParse(f *testing.F) {
	f.Add("t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=x", "1700000000", "msg_1")
	f.Add("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,xyz", "1614265330", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	f.Add("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "", "")
	f.Add("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503", "1531420618", "")
	f.Add("t=,v1=,=,,", "-1", " ")
	f.Add("sha1=", "99999999999999999999", "")
	f.Fuzz(func(t *testing.T, value, ts, id string) {
		for _, s := range Schemes {
			sp := specs[s]
			h := http.Header{sp.header: {value}, HeaderGitHubSHA1: {value}, HeaderStandardTime: {ts}, HeaderSlackTime: {ts}, HeaderStandardID: {id}}
			cand := parse(sp, h)
			if cand.early != nil {
				if cand.early.Reason == ReasonOK || cand.early.Valid {
					t.Fatalf("%s: early verdict %+v", s, cand.early)
				}
				_ = cand.early.Message()
				continue
			}
			if len(cand.sigs) == 0 {
				t.Fatalf("%s: %q parsed to no signature", s, value)
			}
			for _, sig := range cand.sigs {
				if len(sig) != cand.sp.size {
					t.Fatalf("%s: %q gave a %d-byte signature", s, value, len(sig))
				}
			}
			// A whole check over the parsed headers never panics either.
			if r, err := VerifyFields(s, h, []byte(value), Options{Secrets: [][]byte{[]byte("k")}}); err == nil {
				_ = r.Message()
			}
			_ = HeaderOf(s, value, ts, id)
		}
		Detect(http.Header{HeaderStripe: {value}})
	})
}
