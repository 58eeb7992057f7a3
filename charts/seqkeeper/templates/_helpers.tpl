{{/*
Names, labels and the checked list of roots. Every template takes its
roots from "seqkeeper.roots", so bad values fail before anything renders.
*/}}

{{/* The release's name for its objects: <release>-seqkeeper, or the
release name when it holds the chart's name ("seqkeeper" for a release
named seqkeeper, as the plain manifests name everything). */}}
{{- define "seqkeeper.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels of (dict "ctx" $): one set for the release, whatever
the number of roots (one Deployment serves them all), and the plain
manifests' selector. */}}
{{- define "seqkeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
{{- if .ctx.Values.helmLabels }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end }}
{{- end -}}

{{/* Every object's labels, of the same dict. */}}
{{- define "seqkeeper.labels" -}}
{{ include "seqkeeper.selectorLabels" . }}
{{- if .ctx.Values.helmLabels }}
app.kubernetes.io/version: {{ .ctx.Values.image.tag | default .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- end }}
{{- end -}}

{{- define "seqkeeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "seqkeeper.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the API token (and, by default, the S3 keys). */}}
{{- define "seqkeeper.tokenSecret" -}}
{{- .Values.auth.existingSecret | default (include "seqkeeper.fullname" .) -}}
{{- end -}}

{{/* The roots as JSON, each with its store resolved, after the checks:
ZooKeeper servers given, a store for every root, no name, root, store,
election or marker path shared, no root inside another, no client CA
without TLS, and with several roots no extraEnv setting what the config
file's roots: list holds. */}}
{{- define "seqkeeper.roots" -}}
{{- if not .Values.zookeeper.servers -}}
{{- fail "zookeeper.servers is required: the ensemble's host:port list, e.g. --set 'zookeeper.servers={zk-0.zk:2181,zk-1.zk:2181,zk-2.zk:2181}'" -}}
{{- end -}}
{{- if and .Values.httpTLS.clientCA.existingSecret (not .Values.httpTLS.existingSecret) -}}
{{- fail "httpTLS.clientCA needs httpTLS.existingSecret: client certificates need TLS (a server certificate and key)" -}}
{{- end -}}
{{- if gt (len .Values.roots) 1 -}}
{{- range .Values.extraEnv -}}
{{- if has .name (list "SEQKEEPER_ROOT" "SEQKEEPER_STORE" "SEQKEEPER_ELECTION_PATH" "SEQKEEPER_MARKER_PATH") -}}
{{- fail (printf "extraEnv sets %s, which serve refuses or ignores beside several roots: give each root its root, store, electionPath and markerPath in roots" .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $seen := dict -}}
{{- $out := list -}}
{{- range $i, $r := .Values.roots -}}
{{- $store := $r.store | default $.Values.store -}}
{{- if not $store -}}
{{- fail (printf "store is required for root %q: set store=s3://BUCKET/PREFIX?region=REGION (or file:///path), or roots[%d].store" $r.root $i) -}}
{{- end -}}
{{- $each := dict "name" $r.name "root" $r.root "store" $store "electionPath" ($r.electionPath | default "") "markerPath" ($r.markerPath | default "") -}}
{{- range $what := list "name" "root" "store" "electionPath" "markerPath" -}}
{{- $v := get $each $what -}}
{{- if $v -}}
{{- $k := printf "%s %s" $what $v -}}
{{- if hasKey $seen $k -}}
{{- fail (printf "roots %q and %q have the same %s %q: each root needs its own (docs/architecture.md, \"Roots that share a setting are refused\")" (get $seen $k) $r.name $what $v) -}}
{{- end -}}
{{- $_ := set $seen $k $r.name -}}
{{- end -}}
{{- end -}}
{{- range $j, $o := $.Values.roots -}}
{{- if and (ne $i $j) (hasPrefix (printf "%s/" $o.root) $r.root) -}}
{{- fail (printf "root %q lies inside root %q: keep roots siblings, never one inside another" $r.root $o.root) -}}
{{- end -}}
{{- end -}}
{{- $out = append $out $each -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Several roots: the config file SEQKEEPER_CONFIG names, with the
roots: list (docs/cli.md, "Several roots in one process"), its keys those
of seqkeeper's config file. Its directory and path in the container. */}}
{{- define "seqkeeper.configDir" -}}/etc/seqkeeper-config{{- end -}}
{{- define "seqkeeper.configFile" -}}{{ include "seqkeeper.configDir" . }}/roots.yaml{{- end -}}
{{- define "seqkeeper.rootsConfig" -}}
# The roots this release's `seqkeeper serve` replicas host, each with its
# own election, primary, cluster marker and store (docs/cli.md, "Several
# roots in one process"). Every other setting is a SEQKEEPER_* variable of
# the Deployment, shared by all roots. Rendered from the chart's roots.
roots:
{{- range include "seqkeeper.roots" . | fromJsonArray }}
  - name: {{ quote .name }}
    root: {{ quote .root }}
    store: {{ quote .store }}
    {{- with .electionPath }}
    election_path: {{ quote . }}
    {{- end }}
    {{- with .markerPath }}
    marker_path: {{ quote . }}
    {{- end }}
{{- end }}
{{- end -}}

{{/* GOMEMLIMIT: goMemLimit, else 90% of resources.limits.memory in MiB,
else nothing. */}}
{{- define "seqkeeper.goMemLimit" -}}
{{- $limit := "" -}}
{{- with .Values.resources.limits }}{{ $limit = toString (.memory | default "") }}{{ end -}}
{{- if .Values.goMemLimit -}}
{{- .Values.goMemLimit -}}
{{- else if $limit -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $limit -}}
{{- $unit := trimPrefix $num $limit -}}
{{- $mib := dict "" (divf 1 1048576) "Ki" (divf 1 1024) "Mi" 1 "Gi" 1024 "Ti" 1048576 "k" (divf 1000 1048576) "M" (divf 1000000 1048576) "G" (divf 1000000000 1048576) "T" (divf 1000000000000 1048576) -}}
{{- if or (not $num) (not (hasKey $mib $unit)) -}}
{{- fail (printf "cannot derive GOMEMLIMIT from resources.limits.memory %q: set goMemLimit (e.g. 460MiB)" $limit) -}}
{{- end -}}
{{- printf "%dMiB" (mulf $num (get $mib $unit) 0.9 | floor | int) -}}
{{- end -}}
{{- end -}}

{{/* A probe's handler on PATH, of (dict "ctx" $ "path" PATH): HTTP(S),
or tcpSocket when the API requires client certificates, which the
kubelet cannot present. */}}
{{- define "seqkeeper.probe" -}}
{{- if .ctx.Values.httpTLS.clientCA.existingSecret -}}
tcpSocket: {port: http}
{{- else if .ctx.Values.httpTLS.existingSecret -}}
httpGet: {path: {{ .path }}, port: http, scheme: HTTPS}
{{- else -}}
httpGet: {path: {{ .path }}, port: http}
{{- end -}}
{{- end -}}
