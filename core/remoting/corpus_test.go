package remoting_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/clientframes"
)

// corpusDir holds the request frames each official client family sends
// (see internal/clientframes for the file layout).
const corpusDir = "testdata/clients"

// clientLanguages is the header language each client family writes.
var clientLanguages = map[string]string{"java": "JAVA", "go": "GO", "cpp": "CPP"}

// headerField is one extFields key a handler reads, and how.
type headerField struct {
	key  string
	kind byte // 's' required string, 'i'/'I' required int32/int64, 'o'/'O' optional int32/int64, 'b' optional bool
}

// read reads the field with the accessor the handlers use.
func (f headerField) read(req *remoting.Command) error {
	var err error
	switch f.kind {
	case 's':
		_, err = req.Require(f.key)
	case 'i':
		_, err = req.Int32(f.key)
	case 'I':
		_, err = req.Int64(f.key)
	case 'o':
		_, err = req.Int32Or(f.key, 0)
	case 'O':
		_, err = req.Int64Or(f.key, 0)
	case 'b':
		_, err = req.BoolOr(f.key, false)
	default:
		panic("unknown field kind " + string(f.kind))
	}
	return err
}

// codeDecoder is what the broker or the name server decodes of one
// request code: the extFields its handler reads, and its body.
type codeDecoder struct {
	fields []headerField
	body   func(req *remoting.Command) error // nil: the body is not read
}

func fields(spec ...string) []headerField {
	out := make([]headerField, len(spec))
	for i, s := range spec {
		kind, key, _ := strings.Cut(s, ":")
		out[i] = headerField{key: key, kind: kind[0]}
	}
	return out
}

// decoders lists every request code whose header or body the broker or the
// name server decodes from a client, with the readers their handlers use
// (core/broker: clients.go, pull.go, offsets.go, send.go, locks.go,
// retry.go, txn.go, query.go, assignment.go; core/namesrv; the ACL gate
// of internal/server).
var decoders = map[int16]codeDecoder{
	remoting.HeartBeat:               {body: decodeHeartbeat},
	remoting.UnregisterClient:        {fields: fields("s:clientID")},
	remoting.SendMessage:             {body: decodeSend},
	remoting.SendMessageV2:           {body: decodeSend},
	remoting.SendBatchMessage:        {body: decodeSend},
	remoting.PullMessage:             {fields: fields("s:consumerGroup", "s:topic", "i:queueId", "I:queueOffset", "o:maxMsgNums", "o:sysFlag", "O:commitOffset", "O:suspendTimeoutMillis", "O:subVersion"), body: checkPullSubscription},
	remoting.LitePullMessage:         {fields: fields("s:consumerGroup", "s:topic", "i:queueId", "I:queueOffset", "o:maxMsgNums", "o:sysFlag", "O:commitOffset", "O:suspendTimeoutMillis", "O:subVersion"), body: checkPullSubscription},
	remoting.QueryConsumerOffset:     {fields: fields("s:consumerGroup", "s:topic", "i:queueId")},
	remoting.UpdateConsumerOffset:    {fields: fields("s:consumerGroup", "s:topic", "i:queueId", "I:commitOffset")},
	remoting.GetConsumerListByGroup:  {fields: fields("s:consumerGroup")},
	remoting.LockBatchMQ:             {body: decodeLockBatch},
	remoting.UnlockBatchMQ:           {body: decodeLockBatch},
	remoting.ConsumerSendMsgBack:     {fields: fields("s:group", "I:offset", "o:delayLevel", "o:maxReconsumeTimes")},
	remoting.EndTransaction:          {fields: fields("s:producerGroup", "I:commitLogOffset", "o:commitOrRollback", "b:fromTransactionCheck")},
	remoting.QueryAssignment:         {body: decodeQueryAssignment},
	remoting.CheckClientConfig:       {body: decodeCheckClient},
	remoting.GetRouteInfoByTopic:     {fields: fields("s:topic")},
	remoting.GetMaxOffset:            {fields: fields("s:topic", "i:queueId")},
	remoting.GetMinOffset:            {fields: fields("s:topic", "i:queueId")},
	remoting.SearchOffsetByTimestamp: {fields: fields("s:topic", "i:queueId", "I:timestamp")},
	remoting.ViewMessageByID:         {fields: fields("I:offset")},
	remoting.QueryMessage:            {fields: fields("s:topic", "s:key", "o:maxNum", "O:beginTimestamp", "O:endTimestamp", "b:_UNIQUE_KEY_QUERY")},
}

// decode runs a request through its code's decoder; known reports whether
// the code has one.
func decode(req *remoting.Command) (known bool, err error) {
	d, ok := decoders[req.Code]
	if !ok {
		return false, nil
	}
	var errs []error
	for _, f := range d.fields {
		errs = append(errs, f.read(req))
	}
	if d.body != nil {
		errs = append(errs, d.body(req))
	}
	return true, errors.Join(errs...)
}

func decodeHeartbeat(req *remoting.Command) error {
	var hb remoting.HeartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return err
	}
	if hb.ClientID == "" || len(hb.ConsumerDataSet)+len(hb.ProducerDataSet) == 0 {
		return fmt.Errorf("heartbeat of %q names no group", hb.ClientID)
	}
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" || len(cd.SubscriptionDataSet) == 0 {
			return fmt.Errorf("consumer group %q without subscriptions", cd.GroupName)
		}
		if cd.MessageModel != "CLUSTERING" && cd.MessageModel != "BROADCASTING" {
			return fmt.Errorf("group %s: message model %q", cd.GroupName, cd.MessageModel)
		}
		for _, sd := range cd.SubscriptionDataSet {
			if sd.Topic == "" || sd.SubString == "" || sd.SubVersion <= 0 {
				return fmt.Errorf("group %s: subscription %+v lacks a topic, expression or version", cd.GroupName, sd)
			}
			if sd.SubString != "*" && (len(sd.TagsSet) == 0 || len(sd.CodeSet) != len(sd.TagsSet)) {
				return fmt.Errorf("group %s: tag subscription %+v: want as many codes as tags", cd.GroupName, sd)
			}
		}
	}
	for _, pd := range hb.ProducerDataSet {
		if pd.GroupName == "" {
			return errors.New("producer group without a name")
		}
	}
	return nil
}

func decodeSend(req *remoting.Command) error {
	h, err := remoting.DecodeSendHeaderOf(req)
	if err != nil {
		return err
	}
	if h.ProducerGroup == "" || h.Topic == "" || h.BornTimestamp <= 0 {
		return fmt.Errorf("send header %+v lacks its group, topic or born time", h)
	}
	if h.Batch {
		entries, err := message.DecodeBatch(req.Body)
		if err == nil && len(entries) == 0 {
			err = errors.New("empty batch")
		}
		return err
	}
	if len(req.Body) == 0 {
		return errors.New("send without a body")
	}
	return nil
}

// checkPullSubscription checks that a pull that says it carries its
// subscription does.
func checkPullSubscription(req *remoting.Command) error {
	if flag, _ := req.Int32Or("sysFlag", 0); flag&4 != 0 && req.Get("subscription") == "" {
		return errors.New("pull with the subscription flag but no subscription")
	}
	return nil
}

func decodeLockBatch(req *remoting.Command) error {
	var body remoting.LockBatchBody[allocate.Queue]
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return err
	}
	if body.ConsumerGroup == "" || body.ClientID == "" || len(body.MQSet) == 0 {
		return fmt.Errorf("lock batch %+v lacks its group, client or queues", body)
	}
	for _, q := range body.MQSet {
		if q.Topic == "" || q.BrokerName == "" {
			return fmt.Errorf("lock batch queue %+v", q)
		}
	}
	return nil
}

func decodeQueryAssignment(req *remoting.Command) error {
	var body allocate.QueryAssignmentRequest
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return err
	}
	if body.Topic == "" || body.ConsumerGroup == "" || body.ClientID == "" {
		return fmt.Errorf("query assignment %+v lacks its topic, group or client", body)
	}
	if body.MessageModel != allocate.Clustering && body.MessageModel != allocate.Broadcasting {
		return fmt.Errorf("query assignment: message model %q", body.MessageModel)
	}
	return nil
}

func decodeCheckClient(req *remoting.Command) error {
	var body remoting.CheckClientBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return err
	}
	if body.Group == "" || body.SubscriptionData == nil || body.SubscriptionData.SubString == "" {
		return fmt.Errorf("check client %+v lacks its group or subscription", body)
	}
	return nil
}

// TestClientCorpusDecodes decodes every frame of the corpus as the server
// does: the frame, then the extFields and body its code's handler reads.
// A file for a code nobody decodes fails, and so does a decoded code no
// file covers.
func TestClientCorpusDecodes(t *testing.T) {
	frames, err := clientframes.LoadAll(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	covered := map[int16]bool{}
	families := map[string]int{}
	for _, f := range frames {
		t.Run(f.String(), func(t *testing.T) {
			families[f.Client]++
			lang, ok := clientLanguages[f.Client]
			if !ok {
				t.Fatalf("unknown client family %q (want one of java, go, cpp)", f.Client)
			}
			req, err := f.Command()
			if err != nil {
				t.Fatal(err)
			}
			if name := remoting.RequestCode(req.Code).String(); name != f.Name {
				t.Fatalf("the header's code %d is %s; the file is named %s", req.Code, name, f.Name)
			}
			if req.Language != lang || req.IsResponse() {
				t.Fatalf("language %q, flag %d: want a %s request", req.Language, req.Flag, lang)
			}
			known, err := decode(req)
			if !known {
				t.Fatalf("no decoder for %s: the broker and the name server decode nothing of it from a client", f.Name)
			}
			if err != nil {
				t.Fatalf("%s does not decode: %v", f.Name, err)
			}
			covered[req.Code] = true
		})
	}
	for code := range decoders {
		if !covered[code] {
			t.Errorf("no corpus file for %s", remoting.RequestCode(code))
		}
	}
	for family := range clientLanguages {
		if families[family] == 0 {
			t.Errorf("no corpus files for the %s client", family)
		}
	}
}

// FuzzClientFrames feeds frames grown from the corpus through the frame
// decoder and every code's decoders: whatever comes, they return an error
// or a value and never panic.
func FuzzClientFrames(f *testing.F) {
	frames, err := clientframes.LoadAll(corpusDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, fr := range frames {
		f.Add(fr.Wire()[4:])
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var req remoting.Command
		if remoting.DecodeFrame(frame, &req) != nil {
			return
		}
		decode(&req)
		// The same body read as every other code's, too.
		for code := range decoders {
			req.Code = code
			decode(&req)
		}
	})
}

// TestCorpusFilesAreTxtar checks that nothing but corpus files sits in the
// corpus tree, so that a misnamed file is not silently skipped.
func TestCorpusFilesAreTxtar(t *testing.T) {
	err := filepath.WalkDir(corpusDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if rel, _ := filepath.Rel(corpusDir, path); filepath.Ext(path) != ".txtar" || strings.Count(rel, string(filepath.Separator)) != 1 {
			t.Errorf("%s: the corpus holds only CLIENT/CODE[.variant].txtar files", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
