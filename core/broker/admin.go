package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// AdminCode is the request code of this broker's own admin commands
// (`broker admin …`). RocketMQ clients never send it. The command name is
// the extField "command"; arguments and results are JSON bodies.
const AdminCode = 30000

// adminTimeout bounds one admin command.
const adminTimeout = 30 * time.Second

// AdminHandler runs one admin command. args is the request body (JSON,
// possibly empty); the result is encoded as the response body.
type AdminHandler func(ctx context.Context, args json.RawMessage) (any, error)

// ErrUnknownCommand is returned for an admin command nobody registered.
var ErrUnknownCommand = errors.New("broker: unknown admin command")

// adminTable is the registry of admin commands.
type adminTable struct {
	mu       sync.RWMutex
	handlers map[string]AdminHandler
}

func (t *adminTable) set(name string, h AdminHandler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.handlers == nil {
		t.handlers = map[string]AdminHandler{}
	}
	t.handlers[name] = h
}

func (t *adminTable) get(name string) AdminHandler {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.handlers[name]
}

// names returns the registered commands, sorted.
func (t *adminTable) names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var names []string
	for n := range t.handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Handle registers an admin command. Components wired around the
// broker (plugins, the NATS bridge) add theirs; registering a name twice
// replaces the handler.
func (a Admin) Handle(name string, h AdminHandler) {
	b := a.b
	b.admin.set(name, h)
}

// HandleOnReplica registers an admin command that a replica
// (Options.ReplicaID) serves too: one that only reads, or that answers
// where to go instead. A replica refuses every other admin command as a
// write; a master serves both kinds alike.
func (a Admin) HandleOnReplica(name string, h AdminHandler) {
	b := a.b
	b.admin.set(name, h)
	b.replAdmin.set(name, h)
}

// Commands lists the registered admin commands.
func (a Admin) Commands() []string {
	b := a.b
	return b.admin.names()
}

// Run runs an admin command in-process.
func (a Admin) Run(ctx context.Context, name string, args json.RawMessage) (any, error) {
	b := a.b
	h := b.admin.get(name)
	if h == nil {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownCommand, name, b.Admin().Commands())
	}
	return h(ctx, args)
}

func (b *Broker) handleAdmin(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.opts.ReplicaID > 0 && b.replAdmin.get(req.Get("command")) == nil {
		return b.refuseWrite(c, req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	res, err := b.Admin().Run(ctx, req.Get("command"), req.Body)
	if err != nil {
		return response(req, remoting.SystemError, "%v", err)
	}
	body, err := json.Marshal(res)
	if err != nil {
		return response(req, remoting.SystemError, "encode result: %v", err)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// registerBuiltinAdmin adds the broker's own admin commands.
func (b *Broker) registerBuiltinAdmin() {
	b.registerDLQAdmin()
	b.Admin().Handle("consumers.strategy", b.handleStrategyAdmin)
	b.Admin().Handle("offsets.reset", b.handleResetAdmin)
	b.Admin().Handle("topics.lite", b.handleLiteAdmin)
	b.Admin().Handle("topics.list", func(ctx context.Context, _ json.RawMessage) (any, error) {
		return b.Topics(), nil
	})
	b.Admin().Handle("offsets.list", func(ctx context.Context, args json.RawMessage) (any, error) {
		var a struct {
			Group string `json:"group"`
		}
		if err := decodeArgs(args, &a); err != nil {
			return nil, err
		}
		return b.store.ConsumerOffsets(a.Group), nil
	})
}

// decodeArgs decodes admin arguments strictly; empty args are allowed.
func decodeArgs(args json.RawMessage, v any) error {
	if len(args) == 0 {
		return nil
	}
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("bad arguments: %w", err)
	}
	return nil
}
