package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSource is a Source with fixed contents.
type fakeSource struct {
	mu       sync.Mutex
	topics   []Topic
	resent   []int64
	reloads  int
	stored   int64
	dlqCount int
}

func newFake(topics int) *fakeSource {
	f := &fakeSource{dlqCount: 3}
	for i := range topics {
		f.topics = append(f.topics, Topic{Name: fmt.Sprintf("topic-%04d", i), ReadQueues: 4, WriteQueues: 4, Perm: 6, Messages: int64(i), MaxOffsets: int64(i)})
	}
	f.topics = append(f.topics, Topic{Name: "%DLQ%billing", ReadQueues: 1, WriteQueues: 1, Perm: 6, Messages: 3, MaxOffsets: 3})
	f.topics = append(f.topics, Topic{Name: "urgent", ReadQueues: 8, WriteQueues: 8, Perm: 6, MessageType: "PRIORITY"},
		Topic{Name: "user-sessions", ReadQueues: 1, WriteQueues: 1, Perm: 6, MessageType: "LITE", LiteTopics: 3, Messages: 7})
	return f
}

func (f *fakeSource) Overview() Overview {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Overview{BrokerName: "broker-a", Cluster: "DefaultCluster", Addr: "127.0.0.1:1", Started: time.Unix(1e9, 0), Topics: len(f.topics), Stored: f.stored, DiskUsed: 1 << 30, DiskTotal: 4 << 30}
}
func (f *fakeSource) Topics() []Topic {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Topic(nil), f.topics...)
}
func (f *fakeSource) Topic(name string) (TopicDetail, error) {
	for _, t := range f.topics {
		if t.Name == name {
			return TopicDetail{Topic: t, Queues: []Queue{{ID: 0, MinOffset: 0, MaxOffset: 5, LastStored: time.Unix(1e9, 0)}}, Groups: []GroupLag{{Group: "billing", Lag: 2, Committed: true}}}, nil
		}
	}
	return TopicDetail{}, ErrNotFound
}
func (f *fakeSource) Groups() []Group {
	return []Group{{Name: "billing", Online: 1, Model: "CLUSTERING", Strategy: "AVG", Lag: 2, DeadLetters: 3}}
}
func (f *fakeSource) Group(name string) (GroupDetail, error) {
	if name != "billing" {
		return GroupDetail{}, ErrNotFound
	}
	return GroupDetail{Group: f.Groups()[0], Members: []Member{{ClientID: "10.0.0.1@x", Addr: "10.0.0.1:5"}},
		Subscriptions: []Subscription{{Topic: "topic-0001", Type: "TAG", Expression: "a || b"}},
		Queues:        []QueueLag{{Topic: "topic-0001", QueueID: 0, BrokerOffset: 5, ConsumerOffset: 3, Lag: 2}}}, nil
}
func (f *fakeSource) FindMessages(q MessageQuery) ([]Message, error) {
	if q.Key == "missing" {
		return nil, nil
	}
	return []Message{{Topic: "topic-0001", MsgID: "ID1", Properties: []Field{{"KEYS", "k<1>"}}, BodySize: 31, Body: []byte(`<script>alert("x")</script> body`)}}, nil
}
func (f *fakeSource) DeadLetters(group string, from int64, limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	for off := from; off < int64(f.dlqCount) && len(out) < limit; off++ {
		out = append(out, DeadLetter{QueueOffset: off, MsgID: fmt.Sprintf("DL%d", off), Topic: "topic-0001"})
	}
	return out, nil
}
func (f *fakeSource) ResendDeadLetter(group string, off int64) (Resent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off >= int64(f.dlqCount) {
		return Resent{}, errors.New("no such dead letter")
	}
	f.resent = append(f.resent, off)
	return Resent{OldMsgID: fmt.Sprintf("DL%d", off), NewMsgID: "NEW", Topic: "topic-0001"}, nil
}
func (f *fakeSource) Scheduled() Scheduled {
	return Scheduled{Levels: []DelayLevel{{Level: 1, Delay: time.Second, Pending: 7}}, Timed: 2}
}
func (f *fakeSource) Transactions(limit int) Transactions {
	return Transactions{Total: 1, Oldest: []Transaction{{ProducerGroup: "tx-producers", CommitLogOffset: 42}}}
}
func (f *fakeSource) Plugins() []Plugin {
	return []Plugin{{Name: "evenly", Kind: "allocate", Serves: "default", Module: "evenly.wasm", SHA256: "abcdef0123456789", Calls: 9}}
}
func (f *fakeSource) ReloadPlugins(context.Context) (string, error) {
	f.mu.Lock()
	f.reloads++
	f.mu.Unlock()
	return "unchanged evenly", nil
}
func (f *fakeSource) Bridge() ([]Field, bool) { return []Field{{"Connection", "CONNECTED"}}, true }

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	return rec.Code, rec.Body.String()
}

// TestPages renders every page and checks its content.
func TestPages(t *testing.T) {
	h := New(newFake(120), Options{AllowActions: true})
	for _, tc := range []struct{ target, want string }{
		{"/", "broker-a"},
		{"/topics", "topic-0048"},
		{"/topics?page=3", "topic-0100"},
		{"/topics?kind=dlq", "%DLQ%billing"},
		{"/topics?q=0007", "topic-0007"},
		{"/topic?name=topic-0001", "billing"},
		{"/topic?name=topic-0001", "<tr><th>Message type</th><td>any (not set)</td></tr>"},
		{"/topic?name=urgent", "<tr><th>Message type</th><td>PRIORITY</td></tr>"},
		{"/topics?q=urgent", `urgent</a> <span class="tag">PRIORITY</span>`},
		{"/topic?name=user-sessions", "<tr><th>Lite topics</th><td>3</td></tr>"},
		{"/groups", "billing"},
		{"/group?name=billing", "10.0.0.1@x"},
		{"/group?name=billing", "<tr><th>Lag</th><td>2</td></tr>"},
		{"/group?name=billing", `<td class="n">3</td><td class="n">2</td></tr>`},
		{"/message", "By key"},
		{"/message?id=ID1&topic=topic-0001", "k&lt;1&gt;"},
		{"/dlq", "billing"},
		{"/dlq?group=billing", "DL2"},
		{"/scheduled", "Timed messages"},
		{"/transactions", "tx-producers"},
		{"/plugins", "evenly.wasm"},
		{"/bridge", "CONNECTED"},
	} {
		code, body := get(t, h, tc.target)
		if code != 200 || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d, want 200 with %q:\n%s", tc.target, code, tc.want, body)
		}
		if strings.Contains(body, "ZgotmplZ") || strings.Contains(body, "template:") {
			t.Errorf("GET %s: template trouble in the page", tc.target)
		}
	}
	if _, body := get(t, h, "/topics?page=3"); strings.Contains(body, "topic-0098") || !strings.Contains(body, "page 3 of 3") {
		t.Errorf("page 3 shows rows of page 2, or no pager:\n%s", body)
	}
}

// TestMessageEscaped shows a body holding markup as text.
func TestMessageEscaped(t *testing.T) {
	h := New(newFake(1), Options{})
	_, body := get(t, h, "/message?id=ID1&topic=topic-0001")
	if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("body not escaped:\n%s", body)
	}
}

// TestInputRefused answers bad input with 400 before the source sees it.
func TestInputRefused(t *testing.T) {
	h := New(newFake(1), Options{})
	for _, target := range []string{
		"/topic?name=" + url.QueryEscape("a b"),
		"/topic?name=" + strings.Repeat("x", 256),
		"/topic",
		"/group?name=" + url.QueryEscape("<b>"),
		"/topics?page=0",
		"/topics?page=x",
		"/topics?kind=weird",
		"/dlq?group=billing&from=-1",
		"/message?key=k",
		"/message?topic=t&offset=-3",
		"/message?id=" + url.QueryEscape("a\x00b") + "&topic=t",
	} {
		if code, body := get(t, h, target); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400\n%s", target, code, body)
		}
	}
	if code, _ := get(t, h, "/topic?name=nope"); code != http.StatusNotFound {
		t.Errorf("unknown topic: %d, want 404", code)
	}
	if code, _ := get(t, h, "/message?key=missing&topic=t"); code != http.StatusNotFound {
		t.Errorf("no message: %d, want 404", code)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// TestActions checks invariant 1: read-only consoles show no buttons and
// refuse posts; posts need the cookie and its token.
func TestActions(t *testing.T) {
	f := newFake(1)
	ro := New(f, Options{})
	if _, body := get(t, ro, "/dlq?group=billing"); strings.Contains(body, `class="resend"`) || !strings.Contains(body, "read-only") {
		t.Errorf("read-only console shows a resend button")
	}
	post := func(h http.Handler, path string, form url.Values, cookie *http.Cookie, origin string) int {
		req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != nil {
			req.AddCookie(cookie)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post(ro, "/dlq-resend", url.Values{"group": {"billing"}, "offset": {"0"}}, nil, ""); code != http.StatusForbidden {
		t.Errorf("read-only resend: %d, want 403", code)
	}

	h := New(f, Options{AllowActions: true})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/dlq?group=billing", nil))
	m := csrfField.FindStringSubmatch(rec.Body.String())
	cookies := rec.Result().Cookies()
	if m == nil || len(cookies) != 1 {
		t.Fatalf("no token or cookie: %v\n%s", cookies, rec.Body.String())
	}
	token, cookie := m[1], cookies[0]
	form := url.Values{"group": {"billing"}, "offset": {"1"}, "csrf": {token}}
	if code := post(h, "/dlq-resend", form, nil, ""); code != http.StatusForbidden {
		t.Errorf("resend without the cookie: %d, want 403", code)
	}
	bad := url.Values{"group": {"billing"}, "offset": {"1"}, "csrf": {strings.Repeat("0", 64)}}
	if code := post(h, "/dlq-resend", bad, cookie, ""); code != http.StatusForbidden {
		t.Errorf("resend with a wrong token: %d, want 403", code)
	}
	if code := post(h, "/dlq-resend", form, cookie, "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("resend from another origin: %d, want 403", code)
	}
	if len(f.resent) != 0 {
		t.Fatalf("refused posts resent %v", f.resent)
	}
	if code := post(h, "/dlq-resend", form, cookie, "http://example.com"); code != http.StatusOK {
		t.Errorf("resend: %d, want 200", code)
	}
	if code := post(h, "/dlq-resend", url.Values{"group": {"billing"}, "offset": {"9"}, "csrf": {token}}, cookie, ""); code != http.StatusConflict {
		t.Errorf("resend of a missing dead letter: %d, want 409", code)
	}
	if code := post(h, "/plugins-reload", url.Values{"csrf": {token}}, cookie, ""); code != http.StatusOK || f.reloads != 1 {
		t.Errorf("reload: %d, %d reloads", code, f.reloads)
	}
	if len(f.resent) != 1 || f.resent[0] != 1 {
		t.Errorf("resent %v, want [1]", f.resent)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/dlq-resend?group=billing&offset=1", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d, want 405", rec.Code)
	}
}

func TestAuthenticate(t *testing.T) {
	h := New(newFake(1), Options{Authenticate: func(r *http.Request) error {
		if _, _, ok := r.BasicAuth(); !ok {
			return errors.New("log in")
		}
		return nil
	}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/topics", nil))
	if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("no credentials: %d %v", rec.Code, rec.Header())
	}
	req := httptest.NewRequest("GET", "/topics", nil)
	req.SetBasicAuth("admin", "secret")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("with credentials: %d", rec.Code)
	}
}

// TestRates shows the stored rate once a second has passed.
func TestRates(t *testing.T) {
	f := newFake(1)
	now := time.Unix(1e9, 0)
	h := New(f, Options{Now: func() time.Time { return now }})
	if _, body := get(t, h, "/"); !strings.Contains(body, `<p class="big">–</p>`) {
		t.Fatalf("first load shows a rate")
	}
	f.mu.Lock()
	f.stored = 500
	f.mu.Unlock()
	now = now.Add(2 * time.Second)
	if _, body := get(t, h, "/"); !strings.Contains(body, "250.0/s") {
		t.Fatalf("second load: no 250.0/s\n%s", body)
	}

	get(t, h, "/topics?q=topic-0000")
	f.mu.Lock()
	f.topics[0].MaxOffsets += 30
	f.mu.Unlock()
	now = now.Add(500 * time.Millisecond) // too soon: no rate, the sample is kept
	if _, body := get(t, h, "/topics?q=topic-0000"); strings.Contains(body, "/s<") {
		t.Fatalf("a rate over half a second:\n%s", body)
	}
	now = now.Add(2500 * time.Millisecond)
	if _, body := get(t, h, "/topics?q=topic-0000"); !strings.Contains(body, "10.0/s") {
		t.Fatalf("topic rate: no 10.0/s over 3 s\n%s", body)
	}
}

// BenchmarkTopicsPage renders the topic list of 1,000 topics (the
// console's own cost; internal/server's BenchmarkConsolePages adds the
// broker's).
func BenchmarkTopicsPage(b *testing.B) {
	h := New(newFake(1000), Options{})
	req := httptest.NewRequest("GET", "/topics?page=2", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
		io.Discard.Write(rec.Body.Bytes())
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
}
