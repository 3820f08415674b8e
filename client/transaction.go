package client

import (
	"context"
	"fmt"
	"strconv"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// LocalTransactionState is the outcome of a local transaction.
type LocalTransactionState int

const (
	// TransactionUnknown leaves the message pending; the broker will ask
	// CheckLocal later.
	TransactionUnknown LocalTransactionState = iota
	// TransactionCommit makes the message visible to consumers.
	TransactionCommit
	// TransactionRollback discards the message.
	TransactionRollback
)

func (s LocalTransactionState) String() string {
	switch s {
	case TransactionUnknown:
		return "UNKNOW"
	case TransactionCommit:
		return "COMMIT_MESSAGE"
	case TransactionRollback:
		return "ROLLBACK_MESSAGE"
	}
	return "LocalTransactionState(" + strconv.Itoa(int(s)) + ")"
}

// sysFlag returns END_TRANSACTION's commitOrRollback value.
func (s LocalTransactionState) sysFlag() int32 {
	switch s {
	case TransactionCommit:
		return message.SysFlagTxCommit
	case TransactionRollback:
		return message.SysFlagTxRollback
	}
	return message.SysFlagTxNotType
}

// TransactionListener runs the local half of transactional sends.
type TransactionListener interface {
	// ExecuteLocal runs the local transaction of msg once its half
	// message is stored, and says whether to commit it. ctx is
	// SendTransactional's.
	ExecuteLocal(ctx context.Context, msg *Message) LocalTransactionState
	// CheckLocal answers a broker asking about a transaction left
	// unknown (or whose answer was lost). It runs on one of the
	// producer's check workers, never on a connection's reader.
	CheckLocal(msg *MessageExt) LocalTransactionState
}

// TransactionProducer is a Producer that also sends transactional
// messages. Its group must be the same in every process that can answer
// checks for its transactions.
type TransactionProducer struct {
	*Producer
}

// TransactionSendResult is the outcome of SendTransactional.
type TransactionSendResult struct {
	*SendResult
	// State is what was told the broker: ExecuteLocal's answer, or
	// TransactionRollback when the half message was not stored cleanly.
	State LocalTransactionState
}

// Check workers: how many run CheckLocal at once and how many checks may
// wait for them. A broker re-checks a dropped check at its next scan.
const (
	checkWorkers   = 4
	checkQueueSize = 2000
)

// transactionCheck is one CHECK_TRANSACTION_STATE waiting for a worker.
type transactionCheck struct {
	brokerAddr           string
	msg                  *MessageExt
	tranStateTableOffset int64
	commitLogOffset      int64
	transactionID        string
}

// NewTransactionProducer checks opts and returns a transactional producer
// to Start; listener runs the local transactions and answers checks.
func NewTransactionProducer(opts ProducerOptions, listener TransactionListener) (*TransactionProducer, error) {
	if listener == nil {
		panic("client: NewTransactionProducer with a nil listener")
	}
	p, err := NewProducer(opts)
	if err != nil {
		return nil, err
	}
	p.listener = listener
	p.checks = make(chan transactionCheck, checkQueueSize)
	return &TransactionProducer{p}, nil
}

// SendTransactional sends msg as a half message, which consumers do not
// see; runs the listener's ExecuteLocal; and tells the broker to commit or
// roll it back, or, when the state is unknown, to ask CheckLocal later.
// The last step is oneway: if it is lost, the broker asks CheckLocal too.
func (p *TransactionProducer) SendTransactional(ctx context.Context, msg *Message) (*TransactionSendResult, error) {
	in, err := p.instance()
	if err != nil {
		return nil, err
	}
	o, err := p.prepare([]*Message{msg}, true)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, p.opts.SendTimeout)
	res, err := p.sendLoop(sctx, o.topic, 1+p.opts.RetryTimes,
		func(ctx context.Context) ([]MessageQueue, error) { return p.writeQueues(ctx, in, o.topic) },
		func(qs []MessageQueue, lastBroker string) MessageQueue { return p.selectQueue(msg, qs, lastBroker) },
		func(ctx context.Context, q MessageQueue) (*SendResult, error) { return p.sendTo(ctx, in, o, q, false) })
	cancel()
	if err != nil {
		return nil, err
	}
	_, commitLogOffset, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		// The broker will find the half message unanswered and check.
		return nil, fmt.Errorf("client: half message %s stored, but its offset message id is unreadable: %w", res.MsgID, err)
	}
	state := TransactionRollback
	if res.Status == SendOK {
		state = p.executeLocal(ctx, msg)
	}
	txID := res.TransactionID
	if txID == "" {
		txID = res.MsgID
	}
	addr, ok := in.masterAddr(res.Queue.BrokerName)
	if !ok {
		p.log.Warn("no broker address to end a transaction; the broker will check it", "msgId", res.MsgID, "broker", res.Queue.BrokerName)
	} else {
		ectx, cancel := context.WithTimeout(ctx, p.opts.SendTimeout)
		err := p.endTransaction(ectx, in, addr, state, res.QueueOffset, commitLogOffset, res.MsgID, txID, res.Queue.BrokerName, false)
		cancel()
		if err != nil {
			p.log.Warn("ending a transaction failed; the broker will check it", "msgId", res.MsgID, "state", state, "err", err)
		}
	}
	return &TransactionSendResult{SendResult: res, State: state}, nil
}

// executeLocal runs ExecuteLocal; a panic counts as unknown, so the broker
// asks again later.
func (p *Producer) executeLocal(ctx context.Context, msg *Message) (state LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("ExecuteLocal panicked; the transaction is left unknown", "panic", r)
			state = TransactionUnknown
		}
	}()
	return p.listener.ExecuteLocal(ctx, msg)
}

// checkLocal runs CheckLocal; a panic counts as unknown.
func (p *Producer) checkLocal(msg *MessageExt) (state LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("CheckLocal panicked; the transaction is left unknown", "panic", r)
			state = TransactionUnknown
		}
	}()
	return p.listener.CheckLocal(msg)
}

// endTransaction sends END_TRANSACTION oneway (spec §7.2).
func (p *Producer) endTransaction(ctx context.Context, in *instance, addr string, state LocalTransactionState,
	tranStateTableOffset, commitLogOffset int64, msgID, txID, brokerName string, fromCheck bool) error {
	req := remoting.NewRequest(remoting.EndTransaction, map[string]string{
		"producerGroup":        p.opts.Group,
		"tranStateTableOffset": itoa64(tranStateTableOffset),
		"commitLogOffset":      itoa64(commitLogOffset),
		"commitOrRollback":     strconv.Itoa(int(state.sysFlag())),
		"fromTransactionCheck": strconv.FormatBool(fromCheck),
		"msgId":                msgID,
		"transactionId":        txID,
		"bname":                brokerName,
	}, nil)
	return in.rc.InvokeOneway(ctx, addr, req)
}

// checkTransaction queues a broker's check for a worker (producerMember).
// It never blocks the connection's reader: when the queue is full the
// check is dropped, and the broker asks again at its next scan.
func (p *Producer) checkTransaction(brokerAddr string, msg *MessageExt, tranStateTableOffset, commitLogOffset int64, transactionID string) {
	if p.listener == nil {
		p.log.Warn("transaction check for a producer without a transaction listener", "msgId", msg.MsgID)
		return
	}
	c := transactionCheck{brokerAddr, msg, tranStateTableOffset, commitLogOffset, transactionID}
	select {
	case p.checks <- c:
	default:
		p.log.Warn("transaction check queue full; dropping a check", "msgId", msg.MsgID, "queue", checkQueueSize)
	}
}

// startCheckWorkers starts the goroutines that answer checks; they stop
// when quit is closed.
func (p *Producer) startCheckWorkers() {
	for range checkWorkers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case <-p.quit:
					return
				case c := <-p.checks:
					p.answerCheck(c)
				}
			}
		}()
	}
}

// answerCheck runs CheckLocal and sends its answer to the broker that
// asked.
func (p *Producer) answerCheck(c transactionCheck) {
	in, err := p.instance()
	if err != nil {
		return
	}
	state := p.checkLocal(c.msg)
	uniq := c.msg.Property(message.PropertyUniqKey)
	txID := c.msg.Property(message.PropertyTransactionID)
	if txID == "" {
		txID = c.transactionID
	}
	if txID == "" {
		txID = uniq
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.SendTimeout)
	defer cancel()
	if err := p.endTransaction(ctx, in, c.brokerAddr, state, c.tranStateTableOffset, c.commitLogOffset, uniq, txID, "", true); err != nil {
		p.log.Warn("answering a transaction check failed", "msgId", uniq, "broker", c.brokerAddr, "err", err)
	}
}
