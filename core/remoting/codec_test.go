package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"strings"
	"testing"
)

// stdHeader is the JSON header as encoding/json sees it. The tests use it as
// the reference the scanner and writer must agree with.
type stdHeader struct {
	Code      int16             `json:"code"`
	Language  string            `json:"language"`
	Version   int16             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark"`
	ExtFields map[string]string `json:"extFields"`
}

// sendHeaderExt is the extFields of a typical SEND_MESSAGE from the Go
// client.
func sendHeaderExt() map[string]string {
	return map[string]string{
		"producerGroup":         "please_rename_unique_group_name",
		"topic":                 "TopicTest",
		"defaultTopic":          "TBW102",
		"defaultTopicQueueNums": "4",
		"queueId":               "3",
		"sysFlag":               "0",
		"bornTimestamp":         "1732880000123",
		"flag":                  "0",
		"properties":            "UNIQ_KEY\x01C0A8010100002A9F0000000000000001\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01order-1\x02",
		"reconsumeTimes":        "0",
		"unitMode":              "false",
		"maxReconsumeTimes":     "0",
		"batch":                 "false",
		"bname":                 "broker-a",
	}
}

func sendRequest(st byte) *Command {
	c := NewRequest(SendMessage, sendHeaderExt(), []byte("Hello RocketMQ"))
	c.Version = 317
	c.Opaque = 12345
	c.SerializeType = st
	return c
}

// sameCommand reports how a and b differ, treating nil and empty maps and
// bodies as equal.
func sameCommand(a, b *Command) error {
	if a.Code != b.Code || a.Language != b.Language || a.Version != b.Version || a.Opaque != b.Opaque ||
		a.Flag != b.Flag || a.Remark != b.Remark || a.SerializeType != b.SerializeType {
		return fmt.Errorf("fixed fields differ:\n%+v\n%+v", *a, *b)
	}
	if !maps.Equal(a.ExtFields, b.ExtFields) {
		return fmt.Errorf("extFields differ:\n%q\n%q", a.ExtFields, b.ExtFields)
	}
	if !bytes.Equal(a.Body, b.Body) {
		return fmt.Errorf("bodies differ: %q / %q", a.Body, b.Body)
	}
	return nil
}

func TestFrameRoundTrip(t *testing.T) {
	odd := &Command{
		Code: -7, Language: "RUST", Version: -1, Opaque: -2147483648, Flag: FlagResponse | FlagOneway,
		Remark:    "line\nbreak \"quoted\" \\ tab\t \x00\x1f é 中文 \U0001F600 <&>",
		ExtFields: map[string]string{"": "", "k\"ey": "v\\al", "uni": "ü\u2028", "ctl": "\x01\x02"},
		Body:      bytes.Repeat([]byte{0, 1, 2, 0xFF}, 100),
	}
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		for name, c := range map[string]*Command{
			"send":  sendRequest(st),
			"empty": {SerializeType: st},
			"odd":   func() *Command { x := *odd; x.SerializeType = st; return &x }(),
			"response": func() *Command {
				r := NewResponse(sendRequest(st), TopicNotExist, "topic [x] not exist")
				r.SetInt64("queueOffset", -1)
				return r
			}(),
		} {
			t.Run(fmt.Sprintf("type=%d/%s", st, name), func(t *testing.T) {
				frame, err := AppendFrame([]byte("junk"), c)
				if err != nil {
					t.Fatal(err)
				}
				frame = frame[4:]
				if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-4 {
					t.Fatalf("length prefix %d, frame has %d bytes after it", n, len(frame)-4)
				}
				if frame[4] != st {
					t.Fatalf("type byte %d, want %d", frame[4], st)
				}
				var got Command
				if err := DecodeFrame(frame[4:], &got); err != nil {
					t.Fatal(err)
				}
				want := *c
				if st == SerializeRocketMQ && want.Language == "" {
					want.Language = "OTHER" // the binary header has no code for "no language"
				}
				if err := sameCommand(&got, &want); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestSpecHeartbeatBytes checks the frame start the spec verified against
// the Go client: 00 00 03 3A | 00 00 00 58 | {"code":34,...
func TestSpecHeartbeatBytes(t *testing.T) {
	const header = `{"code":34,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{}}`
	if len(header) != 0x58 {
		t.Fatalf("spec header is %d bytes", len(header))
	}
	body := bytes.Repeat([]byte("h"), 0x33A-4-0x58)
	c := NewRequest(HeartBeat, map[string]string{}, body)
	c.Version = 317
	c.Opaque = 1
	frame, err := AppendFrame(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte{0x00, 0x00, 0x03, 0x3A, 0x00, 0x00, 0x00, 0x58}, header...)
	if !bytes.HasPrefix(frame, want) {
		t.Fatalf("frame starts\n%q\nwant\n%q", frame[:len(want)], want)
	}
	if len(frame) != 4+0x33A {
		t.Fatalf("frame is %d bytes, want %d", len(frame), 4+0x33A)
	}
	// And the bytes the client sends decode to the same command.
	var got Command
	if err := DecodeFrame(frame[4:], &got); err != nil {
		t.Fatal(err)
	}
	if err := sameCommand(&got, c); err != nil {
		t.Fatal(err)
	}
}

func jsonFrame(header string) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(len(header)))
	return append(f, header...)
}

func TestJSONExtFieldsLenientRead(t *testing.T) {
	var c Command
	err := DecodeFrame(jsonFrame(`{"code":30,"flag":1,"extFields":{"offset":5,"neg":-12,"f":1.5e3,"unitMode":false,"ok":true,"n":null,"s":"x"}}`), &c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"offset": "5", "neg": "-12", "f": "1.5e3", "unitMode": "false", "ok": "true", "n": "", "s": "x"}
	if !maps.Equal(c.ExtFields, want) {
		t.Fatalf("extFields %q, want %q", c.ExtFields, want)
	}
	// Written back, every value is a JSON string, which is all the Go client
	// can read.
	frame, err := AppendFrame(nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	hl := binary.BigEndian.Uint32(frame[4:]) & maxHeaderLen
	var h stdHeader
	if err := json.Unmarshal(frame[8:8+hl], &h); err != nil {
		t.Fatalf("encoding/json cannot read our header %s: %v", frame[8:8+hl], err)
	}
	if !maps.Equal(h.ExtFields, want) {
		t.Fatalf("re-read extFields %q, want %q", h.ExtFields, want)
	}
	for _, bad := range []string{`{"extFields":{"a":{}}}`, `{"extFields":{"a":[1]}}`, `{"extFields":[]}`, `{"extFields":"x"}`} {
		if err := DecodeFrame(jsonFrame(bad), &c); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestJSONHeaderQuirks(t *testing.T) {
	cases := []struct {
		header string
		want   Command
	}{
		// Java's field order, an extra key, null remark and extFields.
		{`{"code":0,"extFields":null,"flag":1,"language":"JAVA","opaque":7,"remark":null,"serializeTypeCurrentRPC":"JSON","version":409}`,
			Command{Language: "JAVA", Flag: 1, Opaque: 7, Version: 409}},
		// Case-insensitive and escaped keys, nested unknown values, whitespace.
		{" {\"CODE\" : 11 ,\t\"c\\u006fde\":12, \"x\":{\"y\":[1,{\"z\":null},\"\\\"\"]}, \"Remark\":\"r\\u00e9\\ud83d\\ude00\"}\r\n",
			Command{Code: 12, Remark: "ré\U0001F600"}},
		// Lone surrogates and invalid UTF-8 become U+FFFD.
		{"{\"remark\":\"\\ud800x\\udc00\xff\"}", Command{Remark: "\uFFFDx\uFFFD\uFFFD"}},
		// Repeated extFields objects merge; null in between empties.
		{`{"extFields":{"a":"1"},"extFields":{"b":"2"}}`, Command{ExtFields: map[string]string{"a": "1", "b": "2"}}},
		{`{"extFields":{"a":"1"},"extFields":null,"extFields":{"b":"2"}}`, Command{ExtFields: map[string]string{"b": "2"}}},
		{`null`, Command{}},
		{`{}`, Command{}},
		{`{"code":-32768,"opaque":2147483647,"flag":-0}`, Command{Code: -32768, Opaque: 2147483647}},
	}
	for _, tc := range cases {
		var got Command
		if err := DecodeFrame(jsonFrame(tc.header), &got); err != nil {
			t.Errorf("%s: %v", tc.header, err)
			continue
		}
		if err := sameCommand(&got, &tc.want); err != nil {
			t.Errorf("%s: %v", tc.header, err)
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	bin := func(f func([]byte) []byte) []byte {
		h := f(nil)
		return append(binary.BigEndian.AppendUint32(nil, 1<<24|uint32(len(h))), h...)
	}
	fixed := func(b []byte, remarkLen int32) []byte {
		b = append(b, 0, 10, 9, 1, 0x99, 0, 0, 0, 1, 0, 0, 0, 0)
		return binary.BigEndian.AppendUint32(b, uint32(remarkLen))
	}
	cases := map[string][]byte{
		"short":              {0, 0},
		"header past end":    {0, 0, 0, 9, '{', '}'},
		"unknown type":       append([]byte{2, 0, 0, 2}, "{}"...),
		"empty json":         {0, 0, 0, 0},
		"not an object":      jsonFrame(`[1]`),
		"trailing data":      jsonFrame(`{}x`),
		"code overflow":      jsonFrame(`{"code":32768}`),
		"opaque fraction":    jsonFrame(`{"opaque":1.0}`),
		"code as string":     jsonFrame(`{"code":"10"}`),
		"remark as number":   jsonFrame(`{"remark":1}`),
		"bad escape":         jsonFrame(`{"remark":"\x"}`),
		"control char":       jsonFrame("{\"remark\":\"\x01\"}"),
		"unterminated":       jsonFrame(`{"remark":"abc`),
		"bad number":         jsonFrame(`{"x":01}`),
		"missing colon":      jsonFrame(`{"code" 1}`),
		"trailing comma":     jsonFrame(`{"code":1,}`),
		"binary short":       bin(func(b []byte) []byte { return append(b, 0, 10) }),
		"binary remark neg":  bin(func(b []byte) []byte { return fixed(b, -1) }),
		"binary remark long": bin(func(b []byte) []byte { return fixed(b, 5) }),
		"binary no ext":      bin(func(b []byte) []byte { return fixed(b, 0) }),
		"binary ext long": bin(func(b []byte) []byte {
			return binary.BigEndian.AppendUint32(fixed(b, 0), 3)
		}),
		"binary key long": bin(func(b []byte) []byte {
			b = binary.BigEndian.AppendUint32(fixed(b, 0), 3)
			return append(b, 0, 9, 'k')
		}),
		"binary value neg": bin(func(b []byte) []byte {
			b = binary.BigEndian.AppendUint32(fixed(b, 0), 7)
			return append(b, 0, 1, 'k', 0xFF, 0xFF, 0xFF, 0xFF)
		}),
	}
	for name, frame := range cases {
		var c Command
		if err := DecodeFrame(frame, &c); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	// The same binary header, well formed, decodes.
	var c Command
	good := bin(func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(fixed(b, 0), 8)
		return append(b, 0, 1, 'k', 0, 0, 0, 1, 'v')
	})
	if err := DecodeFrame(good, &c); err != nil {
		t.Fatal(err)
	}
	want := Command{Code: 10, Language: "GO", Version: 0x0199, Opaque: 1, ExtFields: map[string]string{"k": "v"}, SerializeType: SerializeRocketMQ}
	if err := sameCommand(&c, &want); err != nil {
		t.Fatal(err)
	}
}

func TestEncodeLimits(t *testing.T) {
	c := &Command{SerializeType: SerializeRocketMQ, ExtFields: map[string]string{strings.Repeat("k", 1<<15): ""}}
	if _, err := AppendFrame(nil, c); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("32 KiB key: err = %v, want ErrFrameTooLarge", err)
	}
	c = &Command{Remark: strings.Repeat("r", 1<<24)}
	dst := []byte("keep")
	out, err := AppendFrame(dst, c)
	if !errors.Is(err, ErrFrameTooLarge) || string(out) != "keep" {
		t.Fatalf("16 MiB header: err = %v, dst %d bytes", err, len(out))
	}
	if _, err := AppendFrame(nil, &Command{SerializeType: 9}); err == nil {
		t.Fatal("serialization type 9 encoded")
	}
}

func TestReadFrame(t *testing.T) {
	var stream []byte
	for i := range 3 {
		c := sendRequest(byte(i % 2))
		c.Opaque = int32(i)
		stream, _ = AppendFrame(stream, c)
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	buf := make([]byte, 0, 4096)
	for i := range 3 {
		frame, err := ReadFrame(r, 0, buf)
		if err != nil {
			t.Fatal(err)
		}
		if &frame[0] != &buf[:1][0] {
			t.Fatal("frame not read into the given buffer")
		}
		var c Command
		if err := DecodeFrame(frame, &c); err != nil || c.Opaque != int32(i) {
			t.Fatalf("frame %d: opaque %d, err %v", i, c.Opaque, err)
		}
	}
	if _, err := ReadFrame(r, 0, buf); err != io.EOF {
		t.Fatalf("at the end: err = %v, want io.EOF", err)
	}

	for name, tc := range map[string]struct {
		in   []byte
		max  int
		want error
	}{
		"too large":      {[]byte{0, 0, 1, 1, 0, 0, 0, 0}, 256, ErrFrameTooLarge},
		"negative":       {[]byte{0xFF, 0xFF, 0xFF, 0xFF}, 0, ErrMalformed},
		"below 4":        {[]byte{0, 0, 0, 3, 0, 0, 0}, 0, ErrMalformed},
		"cut in prefix":  {[]byte{0, 0}, 0, io.ErrUnexpectedEOF},
		"cut in frame":   {[]byte{0, 0, 0, 8, 0, 0, 0, 0}, 0, io.ErrUnexpectedEOF},
		"cut after size": {[]byte{0, 0, 0, 8}, 0, io.ErrUnexpectedEOF},
	} {
		_, err := ReadFrame(bufio.NewReader(bytes.NewReader(tc.in)), tc.max, nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

func TestDecodeReusesMap(t *testing.T) {
	frame, _ := AppendFrame(nil, sendRequest(SerializeJSON))
	c := Command{ExtFields: map[string]string{"stale": "1"}}
	m := c.ExtFields
	if err := DecodeFrame(frame[4:], &c); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.ExtFields["stale"]; ok {
		t.Fatal("stale key survived decoding")
	}
	c.ExtFields["probe"] = "x"
	if m["probe"] != "x" {
		t.Fatal("map was not reused")
	}
}

func TestFieldReaders(t *testing.T) {
	c := NewRequest(PullMessage, nil, nil)
	c.SetInt64("queueOffset", -5)
	c.SetInt32("queueId", 3)
	c.SetBool("unitMode", true)
	c.Set("big", "3000000000")
	c.Set("junk", "x1")
	c.Set("empty", "")

	if v, err := c.Int64("queueOffset"); err != nil || v != -5 {
		t.Errorf("Int64 = %d, %v", v, err)
	}
	if v, err := c.Int32("queueId"); err != nil || v != 3 {
		t.Errorf("Int32 = %d, %v", v, err)
	}
	if v, err := c.Bool("unitMode"); err != nil || !v {
		t.Errorf("Bool = %v, %v", v, err)
	}
	if _, err := c.Int32("big"); !errors.Is(err, ErrInvalidField) || !strings.Contains(err.Error(), `"big"`) {
		t.Errorf("Int32 overflow: %v", err)
	}
	if _, err := c.Bool("junk"); !errors.Is(err, ErrInvalidField) || !strings.Contains(err.Error(), `"junk"`) {
		t.Errorf("Bool junk: %v", err)
	}
	for _, key := range []string{"absent", "empty"} {
		if _, err := c.Int64(key); !errors.Is(err, ErrMissingField) || !strings.Contains(err.Error(), key) {
			t.Errorf("Int64(%s): %v", key, err)
		}
		if v, err := c.Int64Or(key, 7); err != nil || v != 7 {
			t.Errorf("Int64Or(%s) = %d, %v", key, v, err)
		}
		if v, err := c.Int32Or(key, 8); err != nil || v != 8 {
			t.Errorf("Int32Or(%s) = %d, %v", key, v, err)
		}
		if v, err := c.BoolOr(key, true); err != nil || !v {
			t.Errorf("BoolOr(%s) = %v, %v", key, v, err)
		}
	}
	if _, err := c.Int64Or("junk", 1); !errors.Is(err, ErrInvalidField) {
		t.Errorf("Int64Or junk: %v", err)
	}
	if v, err := c.Require("queueId"); err != nil || v != "3" {
		t.Errorf("Require = %q, %v", v, err)
	}
}

func TestCodeNames(t *testing.T) {
	for code, want := range map[RequestCode]string{
		SendMessage: "SEND_MESSAGE", GetRouteInfoByTopic: "GET_ROUTEINFO_BY_TOPIC", SendBatchMessage: "SEND_BATCH_MESSAGE", 999: "RequestCode(999)",
	} {
		if got := code.String(); got != want {
			t.Errorf("RequestCode(%d) = %q, want %q", code, got, want)
		}
	}
	for code, want := range map[ResponseCode]string{
		Success: "SUCCESS", PullOffsetMoved: "PULL_OFFSET_MOVED", FlushDiskTimeout: "FLUSH_DISK_TIMEOUT", -1: "ResponseCode(-1)",
	} {
		if got := code.String(); got != want {
			t.Errorf("ResponseCode(%d) = %q, want %q", code, got, want)
		}
	}
	// Every name is unique within its direction.
	seen := map[string]bool{}
	for _, n := range requestNames {
		if seen[n] {
			t.Errorf("request name %s twice", n)
		}
		seen[n] = true
	}
	// The constants work as int16 codes without conversion.
	var c int16 = SendMessage
	_ = NewResponse(&Command{Code: c}, PullNotFound, "")
}

func TestReadFrameGrowsWithData(t *testing.T) {
	// A large frame read without a buffer arrives whole.
	big := sendRequest(SerializeJSON)
	big.Body = bytes.Repeat([]byte("0123456789"), 50_000)
	stream, err := AppendFrame(nil, big)
	if err != nil {
		t.Fatal(err)
	}
	frame, err := ReadFrame(bufio.NewReader(bytes.NewReader(stream)), 0, nil)
	if err != nil || !bytes.Equal(frame, stream[4:]) {
		t.Fatalf("big frame: %d bytes, %v", len(frame), err)
	}
	// A length prefix claiming 16 MiB, backed by 10 bytes, does not make the
	// reader allocate 16 MiB.
	lie := append([]byte{0x01, 0x00, 0x00, 0x00}, make([]byte, 10)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = ReadFrame(bufio.NewReader(bytes.NewReader(lie)), 0, nil)
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("short frame: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("reading 10 bytes of a 16 MiB frame allocated %d bytes", grew)
	}
}

// TestSetFieldsEncodes checks that extFields set as pairs are written as a
// map would be, in both serializations, and read back by the accessors.
func TestSetFieldsEncodes(t *testing.T) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		c := &Command{Code: Success, Flag: FlagResponse, Opaque: 7, SerializeType: st}
		c.SetFields("msgId", `7F00"01`, "queueId", "3", "dangling")
		frame, err := AppendFrame(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		var d Command
		if err := DecodeFrame(frame[4:], &d); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"msgId": `7F00"01`, "queueId": "3"}
		if !maps.Equal(d.ExtFields, want) {
			t.Errorf("serialization %d: decoded %v, want %v", st, d.ExtFields, want)
		}
		if c.Get("queueId") != "3" || !maps.Equal(c.Fields(), want) {
			t.Errorf("serialization %d: accessors read %v", st, c.Fields())
		}
	}
}
