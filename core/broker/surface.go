package broker

// The broker's exported surface is kept small: *Broker carries the
// lifecycle and the typed operations the front ends (remoting, gRPC)
// and in-process callers use; what only one audience needs hangs off a
// small value type named for that audience.
//
//	View    read-only views for the console, metrics and front ends
//	Outbox  the event log and dead letters, for the NATS bridge
//	Admin   the admin command registry and group administration
//	Hooks   callbacks and factories a front end or plugin host installs
//	POP     the POP consumption engine, for the gRPC front end (pop.go)
//
// Each is a handle on the broker, cheap to copy; none holds state of its
// own (POP's state is the broker's engine, behind the handle).

// View is the read-only side of a broker: consumers, messages, pending
// timers and transactions, lags. It changes nothing.
type View struct{ b *Broker }

// View returns the broker's read-only views.
func (b *Broker) View() View { return View{b} }

// Outbox is the broker's event log and dead-letter queues as the NATS
// bridge reads and replays them.
type Outbox struct{ b *Broker }

// Outbox returns the broker's event log and dead letters.
func (b *Broker) Outbox() Outbox { return Outbox{b} }

// Admin is the registry of admin commands (the ADMIN request code and
// the HTTP admin endpoint) and the group settings only an operator sets.
type Admin struct{ b *Broker }

// Admin returns the broker's admin registry.
func (b *Broker) Admin() Admin { return Admin{b} }

// Hooks is where a front end or the plugin host installs its callbacks
// and factories. Install them before Serve.
type Hooks struct{ b *Broker }

// Hooks returns the broker's installation points.
func (b *Broker) Hooks() Hooks { return Hooks{b} }
