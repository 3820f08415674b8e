package remoting

import (
	"bytes"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
)

func TestDecodeSendHeader(t *testing.T) {
	full := SendHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 8,
		QueueID: 3, SysFlag: 4, BornTimestamp: 1700000000123, Flag: 7, Properties: "TAGS\x01a\x02",
		ReconsumeTimes: 2, UnitMode: true, MaxReconsumeTimes: 16, Batch: true, BrokerName: "broker-a"}
	cases := []struct {
		name string
		code int16
		ext  map[string]string
		want SendHeader
		err  string // a substring of the error; "" for none
	}{
		{"long keys", SendMessage, map[string]string{"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "8", "queueId": "3", "sysFlag": "4", "bornTimestamp": "1700000000123", "flag": "7",
			"properties": "TAGS\x01a\x02", "reconsumeTimes": "2", "unitMode": "true", "maxReconsumeTimes": "16",
			"batch": "true", "bname": "broker-a"}, full, ""},
		{"v2 keys", SendMessageV2, map[string]string{"a": "pg", "b": "T", "c": "TBW102", "d": "8", "e": "3", "f": "4",
			"g": "1700000000123", "h": "7", "i": "TAGS\x01a\x02", "j": "2", "k": "true", "l": "16", "m": "true", "n": "broker-a"}, full, ""},
		{"reply long keys", SendReplyMessage, map[string]string{"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "8", "queueId": "3", "sysFlag": "4", "bornTimestamp": "1700000000123", "flag": "7",
			"properties": "TAGS\x01a\x02", "reconsumeTimes": "2", "unitMode": "true", "maxReconsumeTimes": "16",
			"batch": "true", "bname": "broker-a"}, full, ""},
		{"reply v2 keys", SendReplyMessageV2, map[string]string{"a": "pg", "b": "T", "c": "TBW102", "d": "8", "e": "3", "f": "4",
			"g": "1700000000123", "h": "7", "i": "TAGS\x01a\x02", "j": "2", "k": "true", "l": "16", "m": "true", "n": "broker-a"}, full, ""},
		{"defaults", SendMessage, map[string]string{"topic": "T"}, SendHeader{Topic: "T", DefaultTopicQueueNums: 4, QueueID: -1}, ""},
		{"empty means absent", SendMessageV2, map[string]string{"b": "T", "e": ""}, SendHeader{Topic: "T", DefaultTopicQueueNums: 4, QueueID: -1}, ""},
		{"batch code", SendBatchMessage, map[string]string{"b": "T", "m": "false"}, SendHeader{Topic: "T", DefaultTopicQueueNums: 4, QueueID: -1, Batch: true}, ""},
		{"v1 keys ignored by v2", SendMessageV2, map[string]string{"topic": "T"}, SendHeader{DefaultTopicQueueNums: 4, QueueID: -1}, ""},
		{"bad number", SendMessage, map[string]string{"queueId": "zero"}, SendHeader{}, `"queueId": "zero"`},
		{"bad v2 number", SendMessageV2, map[string]string{"e": "1x"}, SendHeader{}, `"e (queueId)"`},
		{"int32 overflow", SendMessage, map[string]string{"sysFlag": "2147483648"}, SendHeader{}, `"sysFlag"`},
		{"every bad field", SendMessage, map[string]string{"flag": "x", "bornTimestamp": "y"}, SendHeader{}, `"flag"`},
	}
	for _, c := range cases {
		h, err := DecodeSendHeader(c.code, c.ext)
		if c.err != "" {
			if err == nil || !errors.Is(err, ErrInvalidField) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want ErrInvalidField mentioning %s", c.name, err, c.err)
			}
			continue
		}
		if err != nil || h != c.want {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", c.name, h, err, c.want)
		}
	}
	if _, err := DecodeSendHeader(SendMessage, map[string]string{"flag": "x", "bornTimestamp": "y"}); !strings.Contains(err.Error(), "bornTimestamp") {
		t.Errorf("only the first bad field reported: %v", err)
	}
}

func TestSendHeaderRoundTrip(t *testing.T) {
	h := SendHeader{ProducerGroup: "pg", Topic: "T", QueueID: -1, BornTimestamp: -5, MaxReconsumeTimes: 3, BrokerName: "b"}
	for _, code := range []int16{SendMessage, SendMessageV2} {
		ext := h.ExtFields(sendKeysV2(code))
		if len(ext) != sendFields {
			t.Fatalf("code %d: %d keys, want %d", code, len(ext), sendFields)
		}
		got, err := DecodeSendHeader(code, ext)
		if err != nil || got != h {
			t.Fatalf("code %d: %+v, %v; want %+v", code, got, err, h)
		}
	}
}

func TestDecodeSendHeaderAllocs(t *testing.T) {
	ext := (&SendHeader{Topic: "T", Properties: "a\x01b\x02"}).ExtFields(true)
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeSendHeader(SendMessageV2, ext) }); n != 0 {
		t.Fatalf("%v allocations per header", n)
	}
}

// FuzzDecodeSendHeader decodes arbitrary extFields as a send header: it
// must not panic, what it accepts must survive ExtFields and decoding
// again unchanged, and its string fields are the values as sent. data is
// NUL-separated keys and values, alternating.
func FuzzDecodeSendHeader(f *testing.F) {
	f.Add(uint8(0), []byte("topic\x00T\x00queueId\x003\x00properties\x00TAGS\x01a\x02"))
	f.Add(uint8(1), []byte("b\x00T\x00e\x00-1\x00g\x001700000000123\x00l\x0016\x00m\x00true"))
	f.Add(uint8(2), []byte("b\x00T\x00e\x009999999999\x00f\x00x"))
	f.Add(uint8(0), []byte("defaultTopicQueueNums\x00+4\x00bornTimestamp\x00-0\x00unitMode\x00TRUE"))
	codes := [...]int16{SendMessage, SendMessageV2, SendBatchMessage}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		code := codes[int(which)%len(codes)]
		ext := map[string]string{}
		var pairs []string
		parts := bytes.Split(data, []byte{0})
		for i := 0; i+1 < len(parts); i += 2 {
			ext[string(parts[i])] = string(parts[i+1])
			pairs = append(pairs, string(parts[i]), string(parts[i+1]))
		}
		h, err := DecodeSendHeader(code, ext)
		// The pairs a FastHandler's request keeps decode the same as the
		// map, repeated keys included.
		lazy := &Command{Code: code, rawExt: append([]string{}, pairs...)}
		lh, lerr := DecodeSendHeaderOf(lazy)
		if lh != h || (lerr == nil) != (err == nil) || (err != nil && lerr.Error() != err.Error()) {
			t.Fatalf("from pairs %+v, %v; from the map %+v, %v", lh, lerr, h, err)
		}
		if lazy.rawExt == nil || lazy.ExtFields != nil {
			t.Fatal("DecodeSendHeaderOf built the map")
		}
		if got := lazy.ext(); !maps.Equal(got, ext) && len(ext) > 0 {
			t.Fatalf("built map %v, want %v", got, ext)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidField) {
				t.Fatalf("error %v does not wrap ErrInvalidField", err)
			}
			return
		}
		col := 0
		if sendKeysV2(code) {
			col = 1
		}
		for field, s := range map[int]string{sendProducerGroup: h.ProducerGroup, sendTopic: h.Topic,
			sendDefaultTopic: h.DefaultTopic, sendProperties: h.Properties, sendBrokerName: h.BrokerName} {
			if want := ext[sendHeaderKeys[field][col]]; s != want {
				t.Fatalf("field %s = %q, sent %q", sendHeaderKeys[field][0], s, want)
			}
		}
		if code == SendBatchMessage && !h.Batch {
			t.Fatal("a batch request decoded with Batch false")
		}
		again, err := DecodeSendHeader(code, h.ExtFields(col == 1))
		if err != nil || again != h {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, h)
		}
	})
}

func TestValidateTopicName(t *testing.T) {
	for name, want := range map[string]string{
		"T":                      "",
		"%RETRY%g|a_b-c9":        "",
		strings.Repeat("x", 127): "",
		"":                       "empty",
		strings.Repeat("x", 128): "longer than 127",
		"bad topic":              "allowed are",
		"caf\u00e9":              "allowed are",
	} {
		err := ValidateTopicName(name)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("ValidateTopicName(%.20q) = %v, want %q", name, err, want)
		}
	}
}

// TestSendFieldMatchesKeys holds sendField to sendHeaderKeys.
func TestSendFieldMatchesKeys(t *testing.T) {
	for f := range sendFields {
		for col := range 2 {
			if got := sendField(sendHeaderKeys[f][col], col); got != f {
				t.Errorf("sendField(%q, %d) = %d, want %d", sendHeaderKeys[f][col], col, got, f)
			}
			if got := sendField(sendHeaderKeys[f][col], 1-col); got != -1 && sendHeaderKeys[f][col] != sendHeaderKeys[got][1-col] {
				t.Errorf("sendField(%q, %d) = %d", sendHeaderKeys[f][col], 1-col, got)
			}
		}
	}
	for _, k := range []string{"", "o", "A", "Topic", "topic ", "ab"} {
		if got := sendField(k, 0); got != -1 {
			t.Errorf("sendField(%q, 0) = %d", k, got)
		}
		if got := sendField(k, 1); got != -1 {
			t.Errorf("sendField(%q, 1) = %d", k, got)
		}
	}
}

// TestSendHeaderNumbers holds the send header's numbers to strconv.ParseInt,
// which reads what the fast path for plain digits does not.
func TestSendHeaderNumbers(t *testing.T) {
	for _, v := range []string{"0", "-0", "7", "007", "+7", "-", "--1", " 1", "1 ", "1e3", "0x10",
		"2147483647", "2147483648", "-2147483648", "-2147483649",
		"999999999999999999", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "18446744073709551616", "99999999999999999999999"} {
		h, err := DecodeSendHeader(SendMessage, map[string]string{"queueId": v, "bornTimestamp": v})
		q, qerr := strconv.ParseInt(v, 10, 32)
		b, berr := strconv.ParseInt(v, 10, 64)
		if (err == nil) != (qerr == nil && berr == nil) {
			t.Errorf("%q: error %v, strconv %v / %v", v, err, qerr, berr)
			continue
		}
		if err == nil && (int64(h.QueueID) != q || h.BornTimestamp != b) {
			t.Errorf("%q: queueId %d, bornTimestamp %d; strconv %d, %d", v, h.QueueID, h.BornTimestamp, q, b)
		}
	}
}
