module saker.bench/go-h2c

go 1.24
