package console

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// minRateSpan is the shortest span a rate is computed over; page loads
// closer together keep the older sample.
const minRateSpan = time.Second

// rateOf returns the rate of counter n since the previous sample, -1 when
// there is none yet, and keeps n as the next sample once minRateSpan has
// passed.
func rateOf(prev *sample, now time.Time, n int64) float64 {
	if prev.at.IsZero() {
		*prev = sample{at: now, n: n}
		return -1
	}
	d := now.Sub(prev.at)
	if d < minRateSpan {
		return -1
	}
	r := float64(n-prev.n) / d.Seconds()
	*prev = sample{at: now, n: n}
	return max(r, 0)
}

type overviewData struct {
	Overview
	StoredRate float64
}

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	ov := c.src.Overview()
	c.rates.Lock()
	rate := rateOf(&c.rates.stored, c.opts.Now(), ov.Stored)
	c.rates.Unlock()
	c.render(w, r, http.StatusOK, "overview", "Overview", overviewData{Overview: ov, StoredRate: rate})
}

type topicRow struct {
	Topic
	Rate float64
}

type topicsData struct {
	Query string
	Kind  string
	Rows  []topicRow
	Pager pager
}

// topicKind sorts a topic into user, retry, dlq or system.
func topicKind(name string) string {
	switch {
	case strings.HasPrefix(name, "%RETRY%"):
		return "retry"
	case strings.HasPrefix(name, "%DLQ%"):
		return "dlq"
	case strings.HasPrefix(name, "rmq_sys_") || strings.HasPrefix(name, "RMQ_SYS_") || name == "SCHEDULE_TOPIC_XXXX" || name == "TBW102" ||
		strings.HasPrefix(name, "RMQ_") || strings.HasSuffix(name, "_REPLY_TOPIC"):
		return "system"
	}
	return "user"
}

func (c *console) topics(w http.ResponseWriter, r *http.Request) {
	q := r.FormValue("q")
	kind := r.FormValue("kind")
	if len(q) > 255 || (q != "" && !validText(q, 255)) {
		c.fail(w, r, http.StatusBadRequest, "q: at most 255 printable characters")
		return
	}
	switch kind {
	case "", "user", "retry", "dlq", "system":
	default:
		c.fail(w, r, http.StatusBadRequest, "kind: want user, retry, dlq or system")
		return
	}
	all := c.src.Topics()
	now := c.opts.Now()
	// Rates for every topic, so that paging does not lose samples.
	rates := make(map[string]float64, len(all))
	c.rates.Lock()
	span := now.Sub(c.rates.topicsAt)
	keep := c.rates.topicsAt.IsZero() || span >= minRateSpan
	next := c.rates.topics
	if keep {
		next = make(map[string]int64, len(all))
	}
	for _, t := range all {
		rates[t.Name] = -1
		if prev, ok := c.rates.topics[t.Name]; ok && !c.rates.topicsAt.IsZero() && span >= minRateSpan {
			rates[t.Name] = max(0, float64(t.MaxOffsets-prev)/span.Seconds())
		}
		if keep {
			next[t.Name] = t.MaxOffsets
		}
	}
	if keep {
		c.rates.topics, c.rates.topicsAt = next, now
	}
	c.rates.Unlock()

	rows := make([]topicRow, 0, len(all))
	for _, t := range all {
		if q != "" && !strings.Contains(strings.ToLower(t.Name), strings.ToLower(q)) {
			continue
		}
		if kind != "" && topicKind(t.Name) != kind {
			continue
		}
		rows = append(rows, topicRow{Topic: t, Rate: rates[t.Name]})
	}
	slices.SortFunc(rows, func(a, b topicRow) int { return cmp.Compare(a.Name, b.Name) })
	base := url.Values{}
	if q != "" {
		base.Set("q", q)
	}
	if kind != "" {
		base.Set("kind", kind)
	}
	lo, hi, p, err := c.paginate(r, len(rows), base, "topics")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	c.render(w, r, http.StatusOK, "topics", "Topics", topicsData{Query: q, Kind: kind, Rows: rows[lo:hi], Pager: p})
}

// nameParam reads and validates a required topic or group name.
func (c *console) nameParam(w http.ResponseWriter, r *http.Request, param string) (string, bool) {
	name := r.FormValue(param)
	if !validName(name) {
		c.fail(w, r, http.StatusBadRequest, "%s: want a topic or group name (letters, digits, %%, |, _ and -, at most 255)", param)
		return "", false
	}
	return name, true
}

func (c *console) topic(w http.ResponseWriter, r *http.Request) {
	name, ok := c.nameParam(w, r, "name")
	if !ok {
		return
	}
	t, err := c.src.Topic(name)
	if errors.Is(err, ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "no topic %s", name)
		return
	} else if err != nil {
		c.fail(w, r, http.StatusInternalServerError, "topic %s: %v", name, err)
		return
	}
	lo, hi, p, err := c.paginate(r, len(t.Queues), url.Values{"name": {name}}, "topic")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	t.Queues = t.Queues[lo:hi]
	c.render(w, r, http.StatusOK, "topic", "Topic "+name, topicData{TopicDetail: t, Pager: p})
}

type topicData struct {
	TopicDetail
	Pager pager
}

type groupsData struct {
	Query string
	Rows  []Group
	Pager pager
}

func (c *console) groups(w http.ResponseWriter, r *http.Request) {
	q := r.FormValue("q")
	if q != "" && !validText(q, 255) {
		c.fail(w, r, http.StatusBadRequest, "q: at most 255 printable characters")
		return
	}
	var rows []Group
	for _, g := range c.src.Groups() {
		if q == "" || strings.Contains(strings.ToLower(g.Name), strings.ToLower(q)) {
			rows = append(rows, g)
		}
	}
	slices.SortFunc(rows, func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	base := url.Values{}
	if q != "" {
		base.Set("q", q)
	}
	lo, hi, p, err := c.paginate(r, len(rows), base, "groups")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	c.render(w, r, http.StatusOK, "groups", "Consumer groups", groupsData{Query: q, Rows: rows[lo:hi], Pager: p})
}

type groupData struct {
	GroupDetail
	Rows  []QueueLag // the page of GroupDetail.Queues shown
	Pager pager
}

func (c *console) group(w http.ResponseWriter, r *http.Request) {
	name, ok := c.nameParam(w, r, "name")
	if !ok {
		return
	}
	g, err := c.src.Group(name)
	if errors.Is(err, ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "no consumer group %s", name)
		return
	} else if err != nil {
		c.fail(w, r, http.StatusInternalServerError, "group %s: %v", name, err)
		return
	}
	lo, hi, p, err := c.paginate(r, len(g.Queues), url.Values{"name": {name}}, "group")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	c.render(w, r, http.StatusOK, "group", "Group "+name, groupData{GroupDetail: g, Rows: g.Queues[lo:hi], Pager: p})
}

// messageView is a message as the page shows it.
type messageView struct {
	Message
	Text      string // the body preview when it is UTF-8
	Hex       string // else its first bytes in hex
	Truncated bool
}

type messageData struct {
	ID, Key, Topic string
	Queue, Offset  string
	Searched       bool
	Error          string
	Messages       []messageView
}

func (c *console) message(w http.ResponseWriter, r *http.Request) {
	d := messageData{ID: r.FormValue("id"), Key: r.FormValue("key"), Topic: r.FormValue("topic"),
		Queue: r.FormValue("queue"), Offset: r.FormValue("offset")}
	q := MessageQuery{Limit: maxMessages}
	var problems []string
	if d.Topic != "" {
		if !validName(d.Topic) {
			problems = append(problems, "topic: not a topic name")
		}
		q.Topic = d.Topic
	}
	switch {
	case d.ID != "":
		if !validText(d.ID, 128) {
			problems = append(problems, "id: at most 128 printable characters, no spaces")
		}
		q.ID = d.ID
	case d.Key != "":
		if !validText(d.Key, 128) {
			problems = append(problems, "key: at most 128 printable characters, no spaces")
		}
		if d.Topic == "" {
			problems = append(problems, "key: a topic is required")
		}
		q.Key = d.Key
	case d.Offset != "":
		qid, err := intParam(r, "queue", 0, 0, 1<<16)
		if err != nil {
			problems = append(problems, err.Error())
		}
		off, err := intParam(r, "offset", 0, 0, 1<<62)
		if err != nil {
			problems = append(problems, err.Error())
		}
		if d.Topic == "" {
			problems = append(problems, "offset: a topic is required")
		}
		q.QueueID, q.Offset, q.ByOffset = int32(qid), off, true
	default:
		c.render(w, r, http.StatusOK, "message", "Messages", d)
		return
	}
	d.Searched = true
	status := http.StatusOK
	if len(problems) > 0 {
		d.Error = strings.Join(problems, "; ")
		status = http.StatusBadRequest
	} else {
		msgs, err := c.src.FindMessages(q)
		switch {
		case errors.Is(err, ErrNotFound) || err == nil && len(msgs) == 0:
			d.Error = "no message found"
			status = http.StatusNotFound
		case err != nil:
			d.Error = err.Error()
			status = http.StatusBadRequest
		}
		for _, m := range msgs[:min(len(msgs), maxMessages)] {
			d.Messages = append(d.Messages, c.preview(m))
		}
	}
	c.render(w, r, status, "message", "Messages", d)
}

func (c *console) preview(m Message) messageView {
	v := messageView{Message: m, Truncated: len(m.Body) < m.BodySize}
	body := m.Body[:min(len(m.Body), c.opts.BodyPreview)]
	if len(body) < len(m.Body) {
		v.Truncated = true
	}
	if utf8.Valid(body) {
		v.Text = string(body)
		return v
	}
	var sb strings.Builder
	for i, b := range body[:min(len(body), 512)] {
		if i > 0 {
			if i%16 == 0 {
				sb.WriteByte('\n')
			} else {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(strconv.FormatUint(uint64(b)|0x100, 16)[1:])
	}
	v.Hex = sb.String()
	v.Truncated = v.Truncated || len(body) > 512
	return v
}

type dlqData struct {
	Group string
	// Groups lists the dead-letter topics when no group is picked.
	Groups []Topic
	Rows   []DeadLetter
	From   int64
	Next   string
	Pager  pager
}

func (c *console) dlq(w http.ResponseWriter, r *http.Request) {
	if r.FormValue("group") == "" {
		var rows []Topic
		for _, t := range c.src.Topics() {
			if strings.HasPrefix(t.Name, "%DLQ%") {
				rows = append(rows, t)
			}
		}
		slices.SortFunc(rows, func(a, b Topic) int { return cmp.Compare(a.Name, b.Name) })
		lo, hi, p, err := c.paginate(r, len(rows), url.Values{}, "dlq")
		if err != nil {
			c.fail(w, r, http.StatusBadRequest, "%v", err)
			return
		}
		c.render(w, r, http.StatusOK, "dlq", "Dead letters", dlqData{Groups: rows[lo:hi], Pager: p})
		return
	}
	group, ok := c.nameParam(w, r, "group")
	if !ok {
		return
	}
	from, err := intParam(r, "from", 0, 0, 1<<62)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	rows, err := c.src.DeadLetters(group, from, c.opts.PageSize+1)
	if err != nil && !errors.Is(err, ErrNotFound) {
		c.fail(w, r, http.StatusInternalServerError, "dead letters of %s: %v", group, err)
		return
	}
	d := dlqData{Group: group, From: from, Rows: rows}
	if len(rows) > c.opts.PageSize {
		d.Rows = rows[:c.opts.PageSize]
		d.Next = "dlq?" + url.Values{"group": {group}, "from": {strconv.FormatInt(rows[c.opts.PageSize].QueueOffset, 10)}}.Encode()
	}
	c.render(w, r, http.StatusOK, "dlq", "Dead letters of "+group, d)
}

type resultData struct {
	What, Detail, Back string
	Failed             bool
}

func (c *console) dlqResend(w http.ResponseWriter, r *http.Request) {
	group, ok := c.nameParam(w, r, "group")
	if !ok {
		return
	}
	off, err := intParam(r, "offset", -1, 0, 1<<62)
	if err != nil || off < 0 {
		c.fail(w, r, http.StatusBadRequest, "offset: want the dead letter's queue offset")
		return
	}
	back := "dlq?" + url.Values{"group": {group}}.Encode()
	res, err := c.src.ResendDeadLetter(group, off)
	if err != nil {
		c.opts.Logger.Warn("console: resend failed", "group", group, "offset", off, "err", err)
		c.render(w, r, http.StatusConflict, "result", "Resend failed", resultData{What: "Resend failed", Detail: err.Error(), Back: back, Failed: true})
		return
	}
	c.opts.Logger.Info("console: dead letter resent", "group", group, "offset", off, "new_msg_id", res.NewMsgID, "topic", res.Topic)
	c.render(w, r, http.StatusOK, "result", "Resent", resultData{What: "Dead letter resent",
		Detail: "message " + res.OldMsgID + " is in " + res.Topic + " (queue " + strconv.Itoa(int(res.QueueID)) + ") again as " + res.NewMsgID, Back: back})
}

func (c *console) scheduled(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "scheduled", "Delayed and timed", c.src.Scheduled())
}

func (c *console) transactions(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "transactions", "Transactions", c.src.Transactions(c.opts.PageSize))
}

func (c *console) plugins(w http.ResponseWriter, r *http.Request) {
	ps := c.src.Plugins()
	lo, hi, p, err := c.paginate(r, len(ps), url.Values{}, "plugins")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	c.render(w, r, http.StatusOK, "plugins", "Plugins", struct {
		Rows  []Plugin
		Pager pager
	}{ps[lo:hi], p})
}

func (c *console) pluginsReload(w http.ResponseWriter, r *http.Request) {
	what, err := c.src.ReloadPlugins(r.Context())
	if err != nil {
		c.opts.Logger.Warn("console: plugin reload refused", "err", err)
		c.render(w, r, http.StatusConflict, "result", "Reload refused", resultData{What: "Reload refused; the previous plugins keep serving", Detail: err.Error(), Back: "plugins", Failed: true})
		return
	}
	c.opts.Logger.Info("console: plugins reloaded", "result", what)
	c.render(w, r, http.StatusOK, "result", "Plugins reloaded", resultData{What: "Plugins reloaded", Detail: what, Back: "plugins"})
}

func (c *console) bridge(w http.ResponseWriter, r *http.Request) {
	fields, on := c.src.Bridge()
	c.render(w, r, http.StatusOK, "bridge", "NATS bridge", struct {
		On     bool
		Fields []Field
	}{on, fields})
}
