{{/*
The container's environment and the Secrets it mounts, of (dict "ctx" $
"root" ROOT); ROOT is nil with several roots. Settings are SEQKEEPER_*
variables (docs/cli.md), so that changing one rolls the replicas like any
other change to the pod template. The one exception is the roots: list of
several roots, which only a config file holds: it is the ConfigMap
(configmap.yaml), named by SEQKEEPER_CONFIG, whose checksum is an
annotation of the pod template so that a change rolls the replicas too;
SEQKEEPER_ROOT and SEQKEEPER_STORE are then left out (serve refuses them
beside a roots: list). Secrets reach the process as files, never as
variables, except the S3 keys the AWS SDK reads from the environment.
*/}}

{{- define "seqkeeper.env" -}}
{{- $v := .ctx.Values -}}
{{- $r := .root -}}
{{- $port := 7070 -}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
- {name: SEQKEEPER_ID, value: "$(POD_NAME)"}
- {name: SEQKEEPER_ADVERTISE, value: "$(POD_IP):{{ $port }}"}
- {name: SEQKEEPER_HTTP, value: "0.0.0.0:{{ $port }}"} # reachable by the kubelet and the Service
{{- if $v.auth.enabled }}
- {name: SEQKEEPER_HTTP_TOKEN_FILE, value: /etc/seqkeeper/token}
{{- end }}
{{- if $v.auth.admin.existingSecret }}
- {name: SEQKEEPER_HTTP_ADMIN_TOKEN_FILE, value: /etc/seqkeeper-admin/token}
{{- end }}
{{- with $v.httpTLS }}
{{- if .existingSecret }}
- {name: SEQKEEPER_HTTP_TLS_CERT_FILE, value: /etc/seqkeeper-tls/tls.crt}
- {name: SEQKEEPER_HTTP_TLS_KEY_FILE, value: /etc/seqkeeper-tls/tls.key}
{{- end }}
{{- if .clientCA.existingSecret }}
- {name: SEQKEEPER_HTTP_TLS_CLIENT_CA_FILE, value: /etc/seqkeeper-client-ca/ca.crt}
{{- end }}
{{- end }}
- {name: SEQKEEPER_ZK, value: {{ join "," $v.zookeeper.servers | quote }}}
{{- with $v.zookeeper.tls }}
{{- if .existingSecret }}
# TLS to ZooKeeper with an x509 identity (docs/security.md): the
# files are read again when the Secret changes (renewals need no
# restart).
- {name: SEQKEEPER_ZK_TLS_CA_FILE, value: /etc/seqkeeper-zk-tls/ca.crt}
- {name: SEQKEEPER_ZK_TLS_CERT_FILE, value: /etc/seqkeeper-zk-tls/tls.crt}
- {name: SEQKEEPER_ZK_TLS_KEY_FILE, value: /etc/seqkeeper-zk-tls/tls.key}
{{- with .serverName }}
- {name: SEQKEEPER_ZK_TLS_SERVER_NAME, value: {{ quote . }}}
{{- end }}
{{- else }}
# TLS to ZooKeeper (docs/security.md): the chart's zookeeper.tls, as
# deploy/kubernetes/examples/zookeeper-tls.yaml shows.
{{- end }}
{{- end }}
{{- with $v.zookeeper.digest.existingSecret }}
- name: SEQKEEPER_ZK_DIGEST
  valueFrom: {secretKeyRef: {name: {{ . }}, key: {{ $v.zookeeper.digest.key }}}}
{{- end }}
{{- with $r }}
- {name: SEQKEEPER_ROOT, value: {{ quote .root }}}
{{- with .electionPath }}
- {name: SEQKEEPER_ELECTION_PATH, value: {{ quote . }}}
{{- end }}
{{- with .markerPath }}
- {name: SEQKEEPER_MARKER_PATH, value: {{ quote . }}}
{{- end }}
- {name: SEQKEEPER_STORE, value: {{ quote .store }}}
{{- else }}
# The roots: list (the ConfigMap). In the environment rather than a
# --config argument, so that an operator command run in the pod
# (kubectl exec) reads it too, and asks which root: --root-name.
- {name: SEQKEEPER_CONFIG, value: {{ include "seqkeeper.configFile" .ctx | quote }}}
{{- end }}
- {name: SEQKEEPER_CREATE_BUCKET, value: "{{ $v.createBucket }}"}{{ if not $v.createBucket }} # the bucket is made beforehand, with versioning{{ end }}
- {name: SEQKEEPER_SHUTDOWN_DELAY, value: {{ quote $v.shutdownDelay }}}
- {name: SEQKEEPER_LOG_FORMAT, value: {{ $v.logFormat }}}
{{- with include "seqkeeper.goMemLimit" .ctx }}
# The Go garbage collector works harder near the limit instead of
# the pod being killed at it: about 90% of limits.memory.
- {name: GOMEMLIMIT, value: {{ quote . }}}
{{- end }}
{{- $s3 := $v.s3.existingSecret | default (include "seqkeeper.tokenSecret" .ctx) }}
# S3 keys; optional: left out of the Secret with IRSA or an instance role.
- name: AWS_ACCESS_KEY_ID
  valueFrom: {secretKeyRef: {name: {{ $s3 }}, key: {{ $v.s3.accessKeyIDKey }}, optional: true}}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom: {secretKeyRef: {name: {{ $s3 }}, key: {{ $v.s3.secretAccessKeyKey }}, optional: true}}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The Secret volumes and their mounts, of $. Mode 0440 with the pod's
fsGroup: readable by the process, by no one else. */}}
{{- define "seqkeeper.secretVolumes" -}}
{{- $v := .Values -}}
{{- $vols := list -}}
{{- if $v.auth.enabled -}}
{{- $vols = append $vols (dict "name" "token" "path" "/etc/seqkeeper" "secret" (include "seqkeeper.tokenSecret" .) "items" (dict $v.auth.tokenKey "token")) -}}
{{- end -}}
{{- with $v.auth.admin -}}{{- if .existingSecret -}}
{{- $vols = append $vols (dict "name" "admin-token" "path" "/etc/seqkeeper-admin" "secret" .existingSecret "items" (dict .key "token")) -}}
{{- end -}}{{- end -}}
{{- with $v.httpTLS -}}{{- if .existingSecret -}}
{{- $vols = append $vols (dict "name" "tls" "path" "/etc/seqkeeper-tls" "secret" .existingSecret "items" (dict .certKey "tls.crt" .keyKey "tls.key")) -}}
{{- end -}}{{- end -}}
{{- with $v.httpTLS.clientCA -}}{{- if .existingSecret -}}
{{- $vols = append $vols (dict "name" "client-ca" "path" "/etc/seqkeeper-client-ca" "secret" .existingSecret "items" (dict .key "ca.crt")) -}}
{{- end -}}{{- end -}}
{{- with $v.zookeeper.tls -}}{{- if .existingSecret -}}
{{- $vols = append $vols (dict "name" "zk-tls" "path" "/etc/seqkeeper-zk-tls" "secret" .existingSecret "items" (dict .caKey "ca.crt" .certKey "tls.crt" .keyKey "tls.key")) -}}
{{- end -}}{{- end -}}
{{- toJson $vols -}}
{{- end -}}
