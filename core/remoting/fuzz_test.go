package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzDecodeFrame(f *testing.F) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		b, _ := AppendFrame(nil, sendRequest(st))
		f.Add(b)
		r := NewResponse(sendRequest(st), PullNotFound, "no \"new\" message\n")
		r.SetInt64("nextBeginOffset", 12)
		b, _ = AppendFrame(b, r)
		f.Add(b)
	}
	f.Add(jsonFrame(`{"code":34,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{}}`))
	f.Add(jsonFrame(`{"extFields":{"offset":5,"b":true,"n":null},"x":[{"y":"\ud83d\ude00"}],"REMARK":"\u00e9"}`))
	f.Add([]byte{0, 0, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		// As a stream of frames, the way a connection reads them.
		r := bufio.NewReader(bytes.NewReader(data))
		var buf []byte
		for {
			frame, err := ReadFrame(r, 1<<20, buf)
			if err != nil {
				break
			}
			buf = frame[:0]
			checkFrame(t, frame)
		}
		// And as one frame after its length prefix.
		checkFrame(t, data)
	})
}

// checkFrame decodes frame and, if it is valid, checks that encoding and
// decoding again gives the same command.
func checkFrame(t *testing.T, frame []byte) {
	var c Command
	if err := DecodeFrame(frame, &c); err != nil {
		return
	}
	enc, err := AppendFrame(nil, &c)
	if err != nil {
		t.Fatalf("re-encoding %+v: %v", c, err)
	}
	if n := binary.BigEndian.Uint32(enc); int(n) != len(enc)-4 {
		t.Fatalf("length prefix %d for %d bytes", n, len(enc)-4)
	}
	var again Command
	if err := DecodeFrame(enc[4:], &again); err != nil {
		t.Fatalf("re-decoding %q: %v", enc, err)
	}
	if err := sameCommand(&again, &c); err != nil {
		t.Fatal(err)
	}
	if c.SerializeType == SerializeJSON {
		checkStdReads(t, &c)
	}
}

// checkStdReads checks that encoding/json reads the JSON header written for c
// as c, all extFields values being strings.
func checkStdReads(t *testing.T, c *Command) {
	header := appendJSONHeader(nil, c)
	var h stdHeader
	if err := json.Unmarshal(header, &h); err != nil {
		t.Fatalf("encoding/json rejects %q: %v", header, err)
	}
	if h.Code != c.Code || h.Language != fixUTF8(c.Language) || h.Version != c.Version || h.Opaque != c.Opaque ||
		h.Flag != c.Flag || h.Remark != fixUTF8(c.Remark) {
		t.Fatalf("encoding/json reads %+v from %q, want %+v", h, header, c)
	}
	if len(h.ExtFields) != len(c.ExtFields) {
		t.Fatalf("encoding/json reads %q, want %q", h.ExtFields, c.ExtFields)
	}
	for k, v := range c.ExtFields {
		if gv, ok := h.ExtFields[fixUTF8(k)]; !ok || gv != fixUTF8(v) {
			t.Fatalf("encoding/json reads %q, want %q", h.ExtFields, c.ExtFields)
		}
	}
}

// fixUTF8 replaces each byte that is not part of valid UTF-8 with U+FFFD, as
// encoding/json does.
func fixUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// refHeader is stdHeader with extFields values kept raw, so the test can
// apply the one rule where the scanner differs on purpose: numbers and
// booleans are accepted as their text.
type refHeader struct {
	Code      int16                      `json:"code"`
	Language  string                     `json:"language"`
	Version   int16                      `json:"version"`
	Opaque    int32                      `json:"opaque"`
	Flag      int32                      `json:"flag"`
	Remark    string                     `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

// FuzzJSONHeader holds the header scanner to encoding/json: the same inputs
// accepted, the same values out.
func FuzzJSONHeader(f *testing.F) {
	f.Add([]byte(appendJSONHeader(nil, sendRequest(SerializeJSON))))
	f.Add([]byte(`{"code":34,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{}}`))
	f.Add([]byte(`{"Code":1,"c\u006fde":2,"extFields":{"a":5,"b":-1.5e3,"c":true,"d":null},"extFields":{"e":"\ud800"},"x":[[{}]]}`))
	f.Add([]byte(" null "))
	f.Add([]byte(`{"remark":null,"extFields":null,"opaque":-2147483648,"version":1e1}`))
	f.Add([]byte("{\"remark\":\"\xff\\ud83d\\ude00\\u00e9\\/\"}"))
	f.Fuzz(func(t *testing.T, header []byte) {
		var mine Command
		mineErr := DecodeFrame(jsonFrame(string(header)), &mine)
		if len(header) > maxHeaderLen {
			return
		}

		var ref refHeader
		refErr := json.Unmarshal(header, &ref)
		want := Command{Code: ref.Code, Language: ref.Language, Version: ref.Version, Opaque: ref.Opaque,
			Flag: ref.Flag, Remark: ref.Remark}
		refOK := refErr == nil
		if ref.ExtFields != nil {
			want.ExtFields = make(map[string]string, len(ref.ExtFields))
			for k, raw := range ref.ExtFields {
				switch {
				case len(raw) == 0 || string(raw) == "null":
					want.ExtFields[k] = ""
				case raw[0] == '"':
					var s string
					if err := json.Unmarshal(raw, &s); err != nil {
						t.Fatalf("re-reading %s: %v", raw, err)
					}
					want.ExtFields[k] = s
				case raw[0] == '{' || raw[0] == '[':
					refOK = false // nested values are refused on purpose
				default:
					want.ExtFields[k] = string(raw) // number, true, false
				}
			}
		}
		if refOK != (mineErr == nil) {
			t.Fatalf("%q: scanner error %v, encoding/json error %v", header, mineErr, refErr)
		}
		if !refOK {
			return
		}
		if err := sameCommand(&mine, &want); err != nil {
			t.Fatalf("%q: %v", header, err)
		}
		checkStdReads(t, &mine)

		// Kept as pairs (a FastHandler's request, a Client's response),
		// the same header reads the same, through the map built on
		// demand, the send header and the encoders.
		var lazy Command
		if err := decodeFrame(jsonFrame(string(header)), &lazy, func(*Command) bool { return true }); err != nil {
			t.Fatalf("%q: kept as pairs: %v", header, err)
		}
		if lazy.ExtFields != nil {
			t.Fatalf("%q: kept as pairs, yet the map is built", header)
		}
		lh, lerr := DecodeSendHeaderOf(&lazy)
		mh, merr := DecodeSendHeaderOf(&mine)
		if lh != mh || (lerr == nil) != (merr == nil) {
			t.Fatalf("%q: send header from pairs %+v (%v), from the map %+v (%v)", header, lh, lerr, mh, merr)
		}
		for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
			a, b := lazy, mine
			a.SerializeType, b.SerializeType = st, st
			fa, errA := AppendFrame(nil, &a)
			fb, errB := AppendFrame(nil, &b)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("%q: encoding pairs: %v, the map: %v", header, errA, errB)
			}
			if errA != nil || len(want.ExtFields) > 1 || lazy.pairLen() != 2*len(want.ExtFields) {
				continue // a map's keys come in any order; pairs keep a repeated key
			}
			if !bytes.Equal(fa, fb) {
				t.Fatalf("%q: pairs encode as %q, the map as %q", header, fa, fb)
			}
		}
		lazy.Fields()
		if err := sameCommand(&lazy, &want); err != nil {
			t.Fatalf("%q: kept as pairs: %v", header, err)
		}
	})
}

// FuzzJSONWriter holds the header writer to encoding/json for any strings,
// invalid UTF-8 included.
func FuzzJSONWriter(f *testing.F) {
	f.Add(int16(10), int32(1), "GO", "", "topic", "T")
	f.Add(int16(-1), int32(-5), "\xff", "a\"b\\c\n\x00\u2028<>&", "\xc3", "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, code int16, opaque int32, lang, remark, k, v string) {
		c := &Command{Code: code, Opaque: opaque, Language: lang, Remark: remark, ExtFields: map[string]string{k: v}}
		checkStdReads(t, c)
		// What the writer writes, the scanner reads back, cleaned.
		var got Command
		if err := DecodeFrame(jsonFrame(string(appendJSONHeader(nil, c))), &got); err != nil {
			t.Fatal(err)
		}
		want := Command{Code: code, Opaque: opaque, Language: fixUTF8(lang), Remark: fixUTF8(remark),
			ExtFields: map[string]string{fixUTF8(k): fixUTF8(v)}}
		if err := sameCommand(&got, &want); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.ExtFields, want.ExtFields) {
			t.Fatal("extFields differ")
		}
	})
}
