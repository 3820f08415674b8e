package wasm

import "fmt"

// Bounds of what an instance's stderr keeps for one call.
const (
	captureHead = 1 << 10 // the first bytes: a Go panic or fatal error starts here
	captureTail = 3 << 10 // the last bytes
)

// capture keeps the head and the tail of what an instance writes to stderr
// during one call. It is used only by the goroutine holding the instance.
type capture struct {
	head    []byte
	tail    []byte
	skipped int64
}

// Write keeps p's bytes within the bounds and never fails.
func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	if room := captureHead - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - captureTail; over > 0 {
		c.skipped += int64(over)
		c.tail = c.tail[:copy(c.tail, c.tail[over:])]
	}
	return n, nil
}

// reset forgets what was written, keeping the memory.
func (c *capture) reset() { c.head, c.tail, c.skipped = c.head[:0], c.tail[:0], 0 }

// String returns the head, a note of what was skipped, and the tail.
func (c *capture) String() string {
	if c.skipped == 0 {
		return string(c.head) + string(c.tail)
	}
	return fmt.Sprintf("%s…(%d bytes)…%s", c.head, c.skipped, c.tail)
}
