module flextopo.dev/node/alloc

go 1.26.0
