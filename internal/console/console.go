// Package console is the broker's web console: server-rendered pages
// (html/template, no JavaScript) over a Source, for operators to see
// topics, consumer groups and their lag, messages, dead letters, the
// scheduler, transactions, plugins and the NATS bridge, and to take two
// actions: resend a dead letter and reload the plugins.
//
// The console is an http.Handler; whoever serves it decides where. Every
// link is relative, so it works mounted at any prefix ending in a slash.
//
// # Invariants
//
//  1. Nothing changes the broker but a POST to /dlq-resend or
//     /plugins-reload, and only when Options.AllowActions is set, the
//     request passed Options.Authenticate, and its CSRF token matches its
//     cookie (double-submit: the token is an HMAC of the cookie's value
//     under a key the handler draws at New). A request with an Origin
//     header from another host is refused as well.
//  2. Every list is paged (Options.PageSize rows, at most MaxPageSize)
//     or bounded by a broker limit (a group's members and subscriptions,
//     the delay levels; transactions show the oldest page),
//     every input is validated before it reaches the Source (names by the
//     broker's topic and group rules, numbers by range), and every value
//     is escaped by html/template.
//  3. A page is rendered whole into a buffer before any byte is sent: a
//     template failure answers 500 with a plain message, never half a
//     page.
//
// Rates are computed from counters sampled at page loads: the console
// keeps the previous sample (stored messages in total and per topic) and
// shows the rate over the time since, once at least a second has passed.
// Consume rates are not shown: they would need per-group samples the
// broker does not keep.
package console

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Page sizes.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
	// DefaultBodyPreview is how many bytes of a message body are shown.
	DefaultBodyPreview = 4 << 10
	// maxMessages bounds a message search.
	maxMessages = 32
)

// Options configure the console. Zero values mean the documented default.
type Options struct {
	// AllowActions lets viewers resend dead letters and reload plugins.
	// Off: the console is read-only and shows no action buttons.
	AllowActions bool
	// Authenticate, if set, is asked about every request; an error
	// answers 401 with a Basic challenge. The server checks the broker's
	// admin accounts with it when access control is on.
	Authenticate func(r *http.Request) error
	// PageSize is the rows per page of every list. Default
	// DefaultPageSize, at most MaxPageSize.
	PageSize int
	// BodyPreview is how many bytes of a body the message page shows.
	// Default DefaultBodyPreview.
	BodyPreview int
	// Logger receives template and source failures. Default: discarded.
	Logger *slog.Logger
	// Now is the clock of rates. Default time.Now.
	Now func() time.Time
}

//go:embed templates/*.html templates/console.css
var files embed.FS

// console is the handler New returns.
type console struct {
	src     Source
	opts    Options
	pages   map[string]*template.Template
	css     []byte
	csrfKey []byte
	mux     *http.ServeMux

	// rates keeps the previous sample of the counters rates are made of.
	rates struct {
		sync.Mutex
		stored   sample
		topics   map[string]int64
		topicsAt time.Time
	}
}

type sample struct {
	at time.Time
	n  int64
}

// New returns the console over src.
func New(src Source, opts Options) http.Handler {
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	opts.PageSize = min(opts.PageSize, MaxPageSize)
	if opts.BodyPreview <= 0 {
		opts.BodyPreview = DefaultBodyPreview
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &console{src: src, opts: opts, pages: map[string]*template.Template{}, csrfKey: make([]byte, 32)}
	if _, err := rand.Read(c.csrfKey); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	css, err := files.ReadFile("templates/console.css")
	if err != nil {
		panic(err)
	}
	c.css = css
	for _, name := range []string{"overview", "topics", "topic", "groups", "group", "message", "dlq", "scheduled", "transactions", "plugins", "bridge", "result", "error"} {
		c.pages[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html"))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.overview)
	mux.HandleFunc("GET /topics", c.topics)
	mux.HandleFunc("GET /topic", c.topic)
	mux.HandleFunc("GET /groups", c.groups)
	mux.HandleFunc("GET /group", c.group)
	mux.HandleFunc("GET /message", c.message)
	mux.HandleFunc("GET /dlq", c.dlq)
	mux.HandleFunc("POST /dlq-resend", c.action(c.dlqResend))
	mux.HandleFunc("GET /scheduled", c.scheduled)
	mux.HandleFunc("GET /transactions", c.transactions)
	mux.HandleFunc("GET /plugins", c.plugins)
	mux.HandleFunc("POST /plugins-reload", c.action(c.pluginsReload))
	mux.HandleFunc("GET /bridge", c.bridge)
	mux.HandleFunc("GET /console.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Write(c.css)
	})
	c.mux = mux
	return c
}

func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make browsers send "Origin: null" with the forms
	h.Set("X-Frame-Options", "DENY")
	if c.opts.Authenticate != nil {
		if err := c.opts.Authenticate(r); err != nil {
			h.Set("WWW-Authenticate", `Basic realm="rmq-go console", charset="UTF-8"`)
			http.Error(w, "console: "+err.Error(), http.StatusUnauthorized)
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string
	CSRF    string
	Actions bool
	Data    any
}

// render executes a page into a buffer, then writes it.
func (c *console) render(w http.ResponseWriter, r *http.Request, status int, page, title string, data any) {
	v := view{Title: title, Nav: page, Actions: c.opts.AllowActions, Data: data}
	if c.opts.AllowActions {
		v.CSRF = c.csrfToken(w, r)
	}
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, v); err != nil {
		c.opts.Logger.Error("console: page failed", "page", page, "err", err)
		http.Error(w, "console: the page could not be rendered; the broker's log has the details", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail renders the error page.
func (c *console) fail(w http.ResponseWriter, r *http.Request, status int, format string, args ...any) {
	c.render(w, r, status, "error", http.StatusText(status), fmt.Sprintf(format, args...))
}

// The CSRF cookie and its token.
const csrfCookie = "rmq_console_csrf"

func (c *console) sign(v string) string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

// csrfToken returns the token of the request's cookie, setting a new
// cookie when it has none.
func (c *console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 32 {
		return c.sign(ck.Value)
	}
	var b [16]byte
	rand.Read(b[:])
	v := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return c.sign(v)
}

// errForbidden refuses an action.
var errForbidden = errors.New("console: action refused")

// checkAction applies invariant 1 to a POST.
func (c *console) checkAction(r *http.Request) error {
	if !c.opts.AllowActions {
		return fmt.Errorf("%w: this console is read-only", errForbidden)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("%w: the request came from another site (%s)", errForbidden, o)
		}
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) != 32 {
		return fmt.Errorf("%w: no console cookie; reload the page and try again", errForbidden)
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.sign(ck.Value))) {
		return fmt.Errorf("%w: the form's token does not match; reload the page and try again", errForbidden)
	}
	return nil
}

// action wraps an action's handler with checkAction and a bound on the
// form's size.
func (c *console) action(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, http.StatusBadRequest, "bad form: %v", err)
			return
		}
		if err := c.checkAction(r); err != nil {
			c.fail(w, r, http.StatusForbidden, "%v", err)
			return
		}
		fn(w, r)
	}
}

// Input validation.

// validName reports whether s is a topic or group name as the broker
// accepts them (RocketMQ's ^[%|a-zA-Z0-9_-]+$, at most 255 bytes).
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '%' || ch == '|' || ch == '_' || ch == '-') {
			return false
		}
	}
	return true
}

// validText reports whether s is a printable search term of at most max
// bytes (ids and keys).
func validText(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, ch := range s {
		if ch < 0x20 || ch == 0x7f || ch == ' ' {
			return false
		}
	}
	return true
}

// intParam parses an optional integer query parameter within [lo, hi].
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s: want a whole number from %d to %d", name, lo, hi)
	}
	return n, nil
}

// Paging.

// pager describes one page of a list and links to its neighbours.
type pager struct {
	Page, Pages, Total int
	From, To           int // 1-based rows shown
	Prev, Next         string
}

// paginate picks page of n rows; base holds the list's other parameters.
func (c *console) paginate(r *http.Request, n int, base url.Values, path string) (lo, hi int, p pager, err error) {
	page, err := intParam(r, "page", 1, 1, 1<<30)
	if err != nil {
		return 0, 0, p, err
	}
	per := c.opts.PageSize
	pages := max(1, (n+per-1)/per)
	p = pager{Page: int(page), Pages: pages, Total: n}
	if p.Page > pages {
		p.Page = pages
	}
	lo = (p.Page - 1) * per
	hi = min(n, lo+per)
	p.From, p.To = lo+1, hi
	if n == 0 {
		p.From = 0
	}
	link := func(pg int) string {
		q := url.Values{}
		for k, v := range base {
			q[k] = v
		}
		q.Set("page", strconv.Itoa(pg))
		return path + "?" + q.Encode()
	}
	if p.Page > 1 {
		p.Prev = link(p.Page - 1)
	}
	if p.Page < pages {
		p.Next = link(p.Page + 1)
	}
	return lo, hi, p, nil
}

// Template functions.
var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return time.Since(t).Truncate(time.Second).String()
	},
	"bytes": humanBytes,
	"rate": func(r float64) string {
		if r < 0 {
			return "–"
		}
		return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
	},
	"pct": func(a, b int64) string {
		if b == 0 {
			return "–"
		}
		return strconv.FormatFloat(100*float64(a)/float64(b), 'f', 1, 64) + "%"
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"q":        url.QueryEscape,
	"trimDLQ":  func(s string) string { return strings.TrimPrefix(s, "%DLQ%") },
	"navPages": func() []navPage { return nav },
	"join":     strings.Join,
}

// navPage is an entry of the navigation bar.
type navPage struct{ Page, Path, Label string }

var nav = []navPage{
	{"overview", "./", "Overview"}, {"topics", "topics", "Topics"}, {"groups", "groups", "Groups"},
	{"message", "message", "Messages"}, {"dlq", "dlq", "Dead letters"}, {"scheduled", "scheduled", "Scheduled"},
	{"transactions", "transactions", "Transactions"}, {"plugins", "plugins", "Plugins"}, {"bridge", "bridge", "Bridge"},
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTPE"[exp]) + "iB"
}
