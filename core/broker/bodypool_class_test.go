package broker

import "testing"

// TestPullBodyClasses checks the size classes of pooled pull bodies: a
// body gets at least what it asks for, only exact class buffers go back to
// a pool, and what is outside the classes is neither pooled nor lost.
func TestPullBodyClasses(t *testing.T) {
	for _, c := range []struct{ n, class, cap int }{
		{1, -1, 1},
		{8 << 10, -1, 8 << 10},
		{8<<10 + 1, 0, 16 << 10},
		{16 << 10, 0, 16 << 10},
		{16<<10 + 1, 1, 32 << 10},
		{33 << 10, 2, 64 << 10},
		{4 << 20, 8, 4 << 20},
		{4<<20 + 1, -1, 4<<20 + 1},
	} {
		if got := bodyClass(c.n); got != c.class {
			t.Errorf("bodyClass(%d) = %d, want %d", c.n, got, c.class)
		}
		b := newPullBody(c.n)
		if len(b) != 0 || cap(b) != c.cap {
			t.Errorf("newPullBody(%d): len %d cap %d, want 0 and %d", c.n, len(b), cap(b), c.cap)
		}
		releasePullBody(append(b, 'x'))
	}
	// A body that grew past its class is not pooled as that class.
	grown := append(newPullBody(20<<10), make([]byte, 40<<10)...)
	releasePullBody(grown)
	if b := newPullBody(20 << 10); cap(b) != 32<<10 {
		t.Fatalf("class 32 KiB handed out a buffer of %d", cap(b))
	}
}
