module streaming-memory/k8s/tools/yaml2json

go 1.24

require gopkg.in/yaml.v3 v3.0.1
