package allocate

// The JSON bodies of RocketMQ 5's QUERY_ASSIGNMENT (request code 400),
// shared by the broker that answers it and the client that asks. They
// are RocketMQ's QueryAssignmentRequestBody, QueryAssignmentResponseBody
// and MessageQueueAssignment.
//
//	request  {"topic":"T","consumerGroup":"G","clientId":"ip@pid",
//	          "strategyName":"AVG","messageModel":"CLUSTERING"}
//	response {"messageQueueAssignments":[
//	          {"messageQueue":{"topic":"T","brokerName":"b","queueId":0},
//	           "mode":"PULL"}]}

// Message models of QueryAssignmentRequest.MessageModel.
const (
	Clustering   = "CLUSTERING"
	Broadcasting = "BROADCASTING"
)

// ModePull is the one request mode this module serves; RocketMQ also
// knows POP, where consumers share queues.
const ModePull = "PULL"

// QueryAssignmentRequest is the QUERY_ASSIGNMENT request body.
type QueryAssignmentRequest struct {
	Topic         string `json:"topic"`
	ConsumerGroup string `json:"consumerGroup"`
	ClientID      string `json:"clientId"`
	StrategyName  string `json:"strategyName"` // the client's strategy, e.g. "AVG"
	MessageModel  string `json:"messageModel"` // Clustering or Broadcasting
}

// QueueAssignment is one assigned queue (MessageQueueAssignment).
type QueueAssignment struct {
	MessageQueue Queue             `json:"messageQueue"`
	Mode         string            `json:"mode"`                  // ModePull
	Attachments  map[string]string `json:"attachments,omitempty"` // none yet; Java omits a null map
}

// QueryAssignmentResponse is the QUERY_ASSIGNMENT response body. An empty
// list tells the client to drop every queue of the topic.
type QueryAssignmentResponse struct {
	MessageQueueAssignments []QueueAssignment `json:"messageQueueAssignments"`
}
