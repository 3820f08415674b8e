package remoting

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/internal/ratelog"
)

// limitLogInterval is how often one kind of limit hit is logged.
const limitLogInterval = 10 * time.Second

// newLimitLog returns the log of limit hits and refusals: at most one line
// per limitLogInterval per kind, each saying how many were not logged
// since the last one, so a hostile peer cannot flood the log.
func newLimitLog(logger *slog.Logger) *ratelog.Log { return ratelog.New(logger, limitLogInterval) }

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
	// Codes nobody serves share one kind, so that a peer trying every
	// request code makes one line, not one per code.
	kind := "refused unsupported"
	if resp.Code != RequestCodeNotSupported {
		kind = "refused " + strconv.Itoa(int(req.Code)) + " " + strconv.Itoa(int(resp.Code))
	}
	c.ep.limits.Log(level, kind, "remoting: request refused",
		"code", RequestCode(req.Code), "peer", c.remote.String(), "conn", c.id,
		"answer", ResponseCode(resp.Code), "reason", resp.Remark)
}
