package mapping

import (
	"testing"
)

// TestSegmentCases holds evfwd to what Segment's transform (actions-core
// 3.170.0) answered for each case, recorded from it: the behaviours that
// surprise, and every disagreement the differential test found and evfwd
// fixed. Outputs compare as JSON values, numbers as float64 (evfwd keeps a
// message's digits; JavaScript rewrites them); err is Segment's message
// for a pair it throws on (evfwd's Apply fails too, in its own words).
func TestSegmentCases(t *testing.T) {
	cases := []struct {
		name, mapping, msg string
		out, err           string
	}{
		{name: "path a[\"\"] reads the key \"\"", mapping: `{"v":{"@path":"properties[\"\"]"}}`, msg: `{"properties":{"":"empty key","x":1}}`, out: `{"v":"empty key"}`},
		{name: "path a[\"\"] on an array", mapping: `{"v":{"@path":"userId[\"\"]"}}`, msg: `{"userId":[]}`, out: `{}`},
		{name: "template a[\"\"]", mapping: `{"t":{"@template":"{{ properties[\"\"] }}|{{properties}}"}}`, msg: `{"properties":{"":7}}`, out: `{"t":"7|[object Object]"}`},
		{name: "path falsy part way", mapping: `{"a":{"@path":"n.x"},"b":{"@path":"s.x"},"c":{"@path":"f.x"},"d":{"@path":"z.x"},"e":{"@path":"one.x"}}`, msg: `{"n":null,"s":"","f":false,"z":0.0,"one":1}`, out: `{"a":null,"b":"","c":false,"d":0}`},
		{name: "path length and index", mapping: `{"a":{"@path":"s.length"},"b":{"@path":"s.1"},"c":{"@path":"arr.length"},"d":{"@path":"arr[1]"},"e":{"@path":"e.0"},"f":{"@path":"arr.01"}}`, msg: `{"s":"h😀","arr":[10,20],"e":"😀"}`, out: `{"a":3,"b":"\ud83d","c":2,"d":20,"e":"\ud83d"}`},
		{name: "path missing drops the key", mapping: `{"a":{"@path":"nope"},"b":{"@path":"$.userId"},"c":[{"@path":"nope"}]}`, msg: `{"userId":12345678901234567890}`, out: `{"b":12345678901234567000,"c":[null]}`},
		{name: "path dollar anywhere and whole", mapping: `{"a":{"@path":"properties$.x"},"b":{"@path":"$."},"c":{"@path":"."}}`, msg: `{"propertiesx":1,"x":2}`, out: `{"a":1,"b":{"propertiesx":1,"x":2},"c":{"propertiesx":1,"x":2}}`},
		{name: "template numbers and objects", mapping: `{"t":{"@template":"{{a}} {{b}} {{c}} {{d}} {{e}} {{f}} {{g}}"}}`, msg: `{"a":1.0,"b":12345678901234567890,"c":1e21,"d":1e-7,"e":[1,[2,null],{"x":1}],"f":{"x":1},"g":null}`, out: `{"t":"1 12345678901234567000 1e+21 1e-7 1,2,,[object Object] [object Object] "}`},
		{name: "template triple then double", mapping: `{"t":{"@template":"{{{a}}}"}}`, msg: `{"a":"{{b}}","b":"B"}`, out: `{"t":"B"}`},
		{name: "template trims JS white space only", mapping: `{"t":{"@template":"{{\u00a0a\u00a0}}|{{\u0085a}}"}}`, msg: `{"a":"A"}`, out: `{"t":"A|"}`},
		{name: "if exists and blank", mapping: `{"a":{"@if":{"exists":{"@path":"n"},"then":1,"else":2}},"b":{"@if":{"blank":{"@path":"z"},"then":1,"else":2}},"c":{"@if":{"blank":{"@path":"arr"},"then":1,"else":2}},"d":{"@if":{"exists":"literal","then":"yes"}},"e":{"@if":{"exists":{"@path":"nope"},"then":1,"else":""}}}`, msg: `{"n":null,"z":0,"arr":[[]]}`, out: `{"a":2,"b":2,"c":2,"d":"yes"}`},
		{name: "if without exists or blank throws", mapping: `{"a":{"@if":{"then":1}}}`, msg: `{}`, err: `@if requires an "exists" key or a "blank" key`},
		{name: "case on non-strings and unknown operators", mapping: `{"a":{"@case":{"operator":"upper","value":{"@path":"n"}}},"b":{"@case":{"operator":"lower","value":"ÉCOLE ΣΑΣ"}},"c":{"@case":{"operator":"upper","value":"straße"}}}`, msg: `{"n":5}`, out: `{"a":5,"b":"école σας","c":"STRASSE"}`},
		{name: "case operator UPPER validates but throws", mapping: `{"a":{"@case":{"operator":"UPPER","value":"x"}}}`, msg: `{}`, err: `operator key should have a value of "lower" or "upper"`},
		{name: "replace is literal, global by default", mapping: `{"a":{"@replace":{"pattern":".","replacement":"-","value":"a.b.c"}},"b":{"@replace":{"pattern":"a","replacement":"[$&$$]","value":"banana","global":false}},"c":{"@replace":{"pattern":"K","replacement":"x","value":"kK\u212a","ignorecase":true}},"d":{"@replace":{"pattern":"1","value":{"@path":"n"}}},"e":{"@replace":{"pattern":"x","value":{"@path":"o"}}}}`, msg: `{"n":101,"o":{"x":1}}`, out: `{"a":"a-b-c","b":"b[a$]nana","c":"xxK","d":"0","e":""}`},
		{name: "replace pattern2 too long throws at Apply", mapping: `{"a":{"@replace":{"pattern":"a","value":"a","pattern2":"elevenchars"}}}`, msg: `{}`, err: `@replace requires a "pattern" less than 10 characters`},
		{name: "json encode and decode", mapping: `{"a":{"@json":{"mode":"encode","value":{"@path":"o"}}},"b":{"@json":{"mode":"decode","value":{"@path":"s"}}},"c":{"@json":{"mode":"decode","value":"not json"}},"d":{"@json":{"mode":"ENCODE","value":"x"}}}`, msg: `{"o":{"b":1.0,"2":"two","1":"<&>"},"s":"{\"n\":1.50}"}`, out: `{"a":"{\"1\":\"<&>\",\"2\":\"two\",\"b\":1}","b":{"n":1.5},"c":"not json"}`},
		{name: "json value null throws", mapping: `{"a":{"@json":{"mode":"encode","value":null}}}`, msg: `{}`, err: `@json requires a "value" key`},
		{name: "flatten keys and collisions", mapping: `{"a":{"@flatten":{"separator":".","value":{"@path":"o"}}},"b":{"@flatten":{"separator":"_","value":"str"}},"c":{"@flatten":{"separator":".","value":{"@path":"o"},"omitArrays":true}}}`, msg: `{"o":{"x.y":1,"x":{"y":2},"arr":[1,{"z":3}]}}`, out: `{"a":{"x.y":2,"arr.0":1,"arr.1.z":3},"b":{"":"str"},"c":{"x.y":2,"arr":[1,{"z":3}]}}`},
		{name: "merge right and left, strings and arrays", mapping: `{"a":{"@merge":{"direction":"right","objects":[{"x":1,"y":1},{"x":{"@path":"nope"},"z":2}]}},"b":{"@merge":{"direction":"left","objects":[{"x":1},{"x":2,"y":2}]}},"c":{"@merge":{"direction":"right","objects":[{"@path":"s"},{"@path":"arr"}]}}}`, msg: `{"s":"ab","arr":[9]}`, out: `{"a":{"y":1,"z":2},"b":{"x":1,"y":2},"c":{"0":9,"1":"b"}}`},
		{name: "merge without direction throws", mapping: `{"a":{"@merge":{"objects":[{"x":1}]}}}`, msg: `{}`, err: `@merge requires a "direction" key`},
		{name: "arrayPath shapes", mapping: `{"a":{"@arrayPath":["$.properties.products",{"id":{"@path":"product_id"},"p":{"@path":"price"}}]},"b":{"@arrayPath":["properties.one",{"id":{"@path":"product_id"}}]},"c":{"@arrayPath":["properties.products",{}]},"d":{"@arrayPath":["properties.none",{"id":{"@path":"x"}}]}}`, msg: `{"properties":{"products":[{"product_id":"p1","price":1.50},{"product_id":"p2"},3],"one":{"product_id":"solo"}}}`, out: `{"a":[{"id":"p1","p":1.5},{"id":"p2"},{}],"b":[{"id":"solo"}],"c":[{"product_id":"p1","price":1.5},{"product_id":"p2"},3]}`},
		{name: "transform", mapping: `{"a":{"@transform":{"apply":{"full":{"@template":"{{first}} {{last}}"}},"mapping":{"name":{"@path":"full"},"first":{"@path":"first"}}}}}`, msg: `{"first":"Ada","last":"Lovelace"}`, out: `{"a":{"name":"Ada Lovelace"}}`},
		{name: "excludeWhenNull", mapping: `{"a":{"@excludeWhenNull":{"@path":"n"}},"b":{"@excludeWhenNull":{"@path":"o"}}}`, msg: `{"n":null,"o":{"x":null,"y":{"z":null,"w":1},"arr":[null]}}`, out: `{"b":{"y":{"w":1},"arr":[null]}}`},
		{name: "literal resolves directives inside", mapping: `{"a":{"@literal":{"x":{"@path":"userId"}}},"b":{"@literal":[1,{"@path":"userId"}]}}`, msg: `{"userId":"u1"}`, out: `{"a":{"x":"u1"},"b":[1,"u1"]}`},
		{name: "array element with a bad directive throws at Apply", mapping: `{"a":[{"@path":5}]}`, msg: `{}`, err: `@path: expected string, got number`},
		{name: "object with an @key and others is plain", mapping: `{"a":[{"@path":"userId","x":1}]}`, msg: `{"userId":"u1"}`, out: `{"a":[{"@path":"userId","x":1}]}`},
		{name: "root directive", mapping: `{"__segment_internal_directive":{"@arrayPath":["properties.items",{}]},"n":{"@path":"name"}}`, msg: `{"properties":{"items":[{"name":"a"}]}}`, out: `[{"name":"a"}]`},
		{name: "number digits are kept", mapping: `{"a":{"@path":"n"},"b":1.0,"c":{"@path":"big"}}`, msg: `{"n":1.50,"big":12345678901234567890}`, out: `{"a":1.5,"b":1,"c":12345678901234567000}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.mapping))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := m.Apply([]byte(tc.msg))
			if tc.err != "" {
				if err == nil {
					t.Fatalf("Apply = %s, want an error (Segment: %s)", got, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v (Segment: %s)", err, tc.out)
			}
			if !sameJSON(string(got), tc.out) {
				t.Errorf("Apply = %s\n     Segment: %s", got, tc.out)
			}
		})
	}
}
