module github.com/worldfoundry/wfgen

go 1.26
