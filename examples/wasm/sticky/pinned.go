package main

// pinnedC1 is what client c1 of {c1, c2} gets of queues t/b/0..3.
var pinnedC1 = []int{1, 2}
