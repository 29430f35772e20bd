module github.com/tptrain/tptrain/bindings/go

go 1.19
