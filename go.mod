module github.com/rmq-go/rmq

go 1.26
