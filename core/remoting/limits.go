package remoting

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// limitLogInterval is how often one kind of limit hit is logged.
const limitLogInterval = 10 * time.Second

// limitLog logs limit hits at most once per limitLogInterval per kind, so
// a hostile peer cannot turn a limit into a flood of log lines. Each line
// says how many hits were not logged since the last one.
type limitLog struct {
	logger *slog.Logger
	mu     struct {
		sync.Mutex
		kinds map[string]*limitKind
	}
}

type limitKind struct {
	last       time.Time
	suppressed int
}

func newLimitLog(logger *slog.Logger) *limitLog {
	l := &limitLog{logger: logger}
	l.mu.kinds = make(map[string]*limitKind)
	return l
}

// warn logs msg at Warn level unless a line of the same kind was logged in
// the last interval.
func (l *limitLog) warn(kind, msg string, args ...any) { l.log(slog.LevelWarn, kind, msg, args...) }

// info is warn at Info level, for limits that healthy peers hit too.
func (l *limitLog) info(kind, msg string, args ...any) { l.log(slog.LevelInfo, kind, msg, args...) }

func (l *limitLog) log(level slog.Level, kind, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	k := l.mu.kinds[kind]
	if k == nil {
		k = new(limitKind)
		l.mu.kinds[kind] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < limitLogInterval {
		k.suppressed++
		l.mu.Unlock()
		return
	}
	k.last = now
	suppressed := k.suppressed
	k.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "similar_not_logged", suppressed)
	}
	l.logger.Log(context.Background(), level, msg, args...)
}

// frameKind names what a command is, for errors about its frame.
func frameKind(cmd *Command) string {
	if cmd.IsResponse() {
		return "response"
	}
	return "request " + RequestCode(cmd.Code).String()
}

// noteRefusal logs req's answer when it refuses the request (isRefusal):
// the request code, the peer, the answer's code and its remark, at most
// once per limitLogInterval for each pair of request and answer codes.
// A SYSTEM_ERROR, a failure on this side, is logged at Warn; the other
// refusals, which name a problem of the request, at Info. Refusals that
// an Authorize hook answered are left to the hook, which logs its own.
func (c *Conn) noteRefusal(req, resp *Command) {
	if resp == nil || !c.ep.logRefusals || resp.refusalLogged || !isRefusal(resp.Code) {
		return
	}
	resp.refusalLogged = true
	level := slog.LevelInfo
	if resp.Code == SystemError {
		level = slog.LevelWarn
	}
	kind := "refused " + strconv.Itoa(int(req.Code)) + " " + strconv.Itoa(int(resp.Code))
	c.ep.limits.log(level, kind, "remoting: request refused",
		"code", RequestCode(req.Code), "peer", c.remote.String(), "conn", c.id,
		"answer", ResponseCode(resp.Code), "reason", resp.Remark)
}
