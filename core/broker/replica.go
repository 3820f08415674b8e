package broker

import (
	"slices"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// A replica (Options.ReplicaID) serves what RocketMQ's slaves serve: pulls,
// offset and time lookups, queries and heartbeats, from a store the set's
// leader keeps through replication. Clients pull from it when their route
// names no master (the set has lost its majority, or is between leaders)
// and when a master suggests it; every pull it answers suggests the master
// again. Writes go to the master: a replica refuses them, naming why, with
// NO_PERMISSION, on which the official client's sends retry elsewhere.
// Of this broker's own admin commands it serves only those registered
// with HandleReplicaAdmin.

// replicaWrites are the request codes a replica refuses.
var replicaWrites = []int16{
	remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage,
	remoting.SendReplyMessage, remoting.SendReplyMessageV2,
	remoting.UpdateConsumerOffset, remoting.ConsumerSendMsgBack, remoting.EndTransaction,
	remoting.UpdateAndCreateTopic, remoting.DeleteTopicInBroker,
	remoting.UpdateAndCreateSubscriptionGroup, remoting.DeleteSubscriptionGroup,
	remoting.LockBatchMQ, remoting.UnlockBatchMQ,
	remoting.InvokeBrokerToResetOffset,
}

// handle registers fn for code, or, on a replica, a refusal when code
// writes.
func (b *Broker) handle(code int16, fn remoting.Handler) {
	if b.opts.ReplicaID > 0 && slices.Contains(replicaWrites, code) {
		fn = b.refuseWrite
	}
	b.rs.Handle(code, fn)
}

func (b *Broker) refuseWrite(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return response(req, remoting.NoPermission,
		"broker %s is a replica (brokerId %d) of its set: writes go to the master, brokerId 0 (%s)", b.opts.BrokerName, b.opts.ReplicaID, b.leaderHint())
}

// notMaster answers a write the store refused because this member stopped
// leading its set (store.ErrNotLeader) while the broker still served as
// its master: SERVICE_NOT_AVAILABLE, what RocketMQ's slave store answers
// a put with, and which the official clients retry on another broker.
// It is routine during a failover, so it is logged at debug level, at
// most once per limitLogGap.
func (b *Broker) notMaster(req *remoting.Command, what string, err error) *remoting.Command {
	return refused(req, what, b.notLeader(what, err))
}

// notLeader is the refusal of a write this member can no longer take.
func (b *Broker) notLeader(what string, err error) error {
	if b.notMasterLog.allow(time.Now()) {
		b.log.Debug("write refused: this member no longer leads its set", "request", what, "err", err)
	}
	return refusef(ErrNotLeader, "broker %s is not its set's master now: retry on the master (%s)", b.opts.BrokerName, b.leaderHint())
}

// leaderHint names the set's leader for a refusal's remark.
func (b *Broker) leaderHint() string {
	if b.opts.Leader != nil {
		if l := b.opts.Leader(); l != "" {
			return "the set's leader is " + l
		}
	}
	return "no leader is known yet"
}
