#!/usr/bin/python3
"""Writes accelmon's Grafana dashboards and Prometheus rule files from the tables below.

    /usr/bin/python3 dashboards/generate.py            # rewrites the files in place
    /usr/bin/python3 dashboards/generate.py --out DIR  # writes the same tree under DIR (CI diffs it)
    /usr/bin/python3 dashboards/generate.py --list-queries   # JSON: every panel query, for the e2e

Output (relative to the output root, default the repository root):
    dashboards/grafana/*.json                 one file per dashboard
    dashboards/prometheus/alerts.yml          alerting rules (one per diagnostics rule + raw metrics)
    dashboards/prometheus/recording.yml       recording rules the dashboards use
    dashboards/prometheus/jobs.yml            the job-wide rules (straggler, stall) over every
                                              exporter's series: recording rules and alerts
                                              in one group (hand-written promtool tests:
                                              dashboards/prometheus/tests/job_rules_test.yml)
    dashboards/prometheus/tests/diagnosis_alerts_test.yml   promtool unit tests of the
                                              diagnosis alerts (the raw-metric alerts and the
                                              recording rules have hand-written tests beside it)
    deploy/kubernetes/prometheusrule.yaml     the same alerting, recording and job groups as a
                                              Prometheus operator PrometheusRule

Standard library only; the output is deterministic (sorted keys, ids from the tables' order), so
`git diff --exit-code` after a run proves the committed files are what this script makes. Every
alert must have a section in docs/runbooks.md (checked here, so a new alert cannot ship without
one). Metric names used here are the contract in docs/architecture.md and
docs/metrics.md.
"""
import argparse
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNBOOK_BASE = "https://github.com/accelmon/accelmon/blob/main/docs/runbooks.md"
DIAGNOSTICS_DOC = "https://github.com/accelmon/accelmon/blob/main/docs/diagnostics.md"

# ---------------------------------------------------------------------------------------------
# Recording rules: the heavy dashboard queries, evaluated once per interval instead of per panel.
# Link utilization is the share of the link's two-way capacity in use: (tx + rx) rate over twice
# the one-direction max bandwidth, so it stays within 0..1.
JOIN_JOB = " * on (instance, node, device) group_left (job_id, rank) accelmon_device_job"
RECORDING = [
    ("accelmon:device_link_utilization:ratio_rate1m",
     "(rate(accelmon_device_link_transmit_bytes_total[1m]) + rate(accelmon_device_link_receive_bytes_total[1m]))"
     " / (2 * accelmon_device_link_max_bandwidth_bytes_per_second > 0)"),
    ("accelmon:node_device_link_utilization:avg_ratio_rate1m",
     "avg by (node) (accelmon:device_link_utilization:ratio_rate1m)"),
    ("accelmon:host_link_utilization:ratio_rate1m",
     "(rate(accelmon_host_link_transmit_bytes_total[1m]) + rate(accelmon_host_link_receive_bytes_total[1m]))"
     " / (2 * accelmon_host_link_max_bandwidth_bytes_per_second > 0)"),
    ("accelmon:device_memory_used:ratio",
     "accelmon_device_memory_used_bytes / (accelmon_device_memory_total_bytes > 0)"),
    ("accelmon:node_device_memory_used_bytes:sum", "sum by (node) (accelmon_device_memory_used_bytes)"),
    ("accelmon:node_device_memory_total_bytes:sum", "sum by (node) (accelmon_device_memory_total_bytes)"),
    ("accelmon:fleet_device_memory_used:ratio",
     "sum(accelmon_device_memory_used_bytes) / sum(accelmon_device_memory_total_bytes > 0)"),
    ("accelmon:node_device_memory_fragmentation:max",
     "max by (node) (accelmon_device_memory_fragmentation_ratio)"),
    # Device series joined to their job: accelmon_device_job is one series per device of a job
    # (its first holder with a job id), so group_left never meets two on one side; job_id and
    # rank come from it. instance keeps two exporters that see the same node apart.
    ("accelmon:device_compute_utilization_ratio:by_job",
     'accelmon_device_utilization_ratio{kind="compute"}' + JOIN_JOB),
    ("accelmon:device_memory_headroom_bytes:by_job",
     "(accelmon_device_memory_total_bytes - accelmon_device_memory_used_bytes)" + JOIN_JOB),
    ("accelmon:device_link_traffic_bytes_per_second:by_job",
     "sum without (link, kind, peer) (rate(accelmon_device_link_transmit_bytes_total[1m])"
     " + rate(accelmon_device_link_receive_bytes_total[1m]))" + JOIN_JOB),
    # Per job, over every exporter (accelmon_job_* are per exporter: one shard's nodes).
    ("accelmon:job_memory_headroom_bytes:min", "min by (job_id) (accelmon:device_memory_headroom_bytes:by_job)"),
    ("accelmon:job_link_traffic_bytes_per_second:sum",
     "sum by (job_id) (accelmon:device_link_traffic_bytes_per_second:by_job)"),
]

# ---------------------------------------------------------------------------------------------
# Alerts. One per diagnostics rule, from accelmon_diagnosis_active: the exporter already applied
# the rule's thresholds and `for`, so the alert fires as soon as the finding is open and carries
# the finding's own severity label.
DIAGNOSIS_RULES = [
    # rule id, alert name, what it means (summary)
    ("memory_fragmentation", "AccelmonMemoryFragmentation",
     "device memory is fragmented: large allocations may fail while free memory looks ample"),
    ("host_oom_kill", "AccelmonHostOomKill", "the kernel's OOM killer killed a process"),
    ("thermal_throttling", "AccelmonThermalThrottling", "the device is throttling or close to its slowdown temperature"),
    ("link_down", "AccelmonLinkDown", "a device link that was up went down"),
    ("link_degraded", "AccelmonLinkDegraded", "a device link runs below its capacity or far below its siblings' traffic"),
    ("link_flapping", "AccelmonLinkFlapping", "a device link keeps going up and down"),
    ("job_stall", "AccelmonJobStall", "every device of the job went idle with silent links while memory stays allocated"),
    ("throughput_drop", "AccelmonThroughputDrop", "the device works far below its own recent baseline"),
    ("low_sm_activity", "AccelmonLowSmActivity",
     "a job's GPU runs its SMs far below its own median for that job (profiling counters)"),
    ("memory_leak", "AccelmonMemoryLeak", "device memory use grows steadily toward exhaustion"),
    ("ecc_errors", "AccelmonEccErrors", "the device reports ECC memory errors"),
    ("xid_error", "AccelmonXidError", "the driver reported an XID error for the device"),
    ("firmware_below_minimum", "AccelmonFirmwareBelowMinimum", "device firmware or driver is below the configured minimum"),
    ("device_lost", "AccelmonDeviceLost", "the device stopped answering"),
    ("job_straggler", "AccelmonJobStraggler",
     "one rank of the job is much slower than the job's median (utilization, link traffic or step rate) for a sustained time"),
]

L = "{{ $labels.%s }}"
V = "{{ $value | humanize }}"

# Raw-metric alerts: name, expr, for, severity, summary, description.
RAW_ALERTS = [
    ("AccelmonNodeDown", "accelmon_node_up == 0", "2m", "critical",
     "accelmon node %s stopped reporting" % (L % "node"),
     "The agent on %s has sent no report for three collection intervals (exporter %s). Its devices "
     "are unmonitored and its diagnostics frozen." % (L % "node", L % "instance")),
    ("AccelmonExporterDown", 'up{job="accelmon"} == 0', "1m", "critical",
     "accelmon exporter %s is not scraped" % (L % "instance"),
     "Prometheus cannot scrape the accelmon exporter at %s: every node of its shard is invisible." % (L % "instance")),
    ("AccelmonAgentDroppingReports", "increase(accelmon_agent_dropped_reports_total[10m]) > 0", "0s", "warning",
     "accelmon agent on %s dropped reports" % (L % "node"),
     "The agent on %s dropped reports in the last 10 minutes: its spool was full or the exporter "
     "cannot accept them. Telemetry and recordings have gaps." % (L % "node")),
    ("AccelmonAgentSpoolGrowing", "accelmon_agent_spool_reports > 120 and deriv(accelmon_agent_spool_reports[10m]) > 0",
     "10m", "warning",
     "accelmon agent on %s has a growing backlog" % (L % "node"),
     "%s reports wait unacknowledged in the agent's spool on %s and the backlog keeps growing: the "
     "agent cannot deliver to its exporter fast enough." % (V, L % "node")),
    ("AccelmonCollectorFailing", "accelmon_agent_collector_success == 0", "10m", "warning",
     "collector %s fails on %s" % (L % "collector", L % "node"),
     "The %s collector on %s has not read its source for 10 minutes; its series are missing." % (L % "collector", L % "node")),
    ("AccelmonDeviceTemperatureHigh",
     'max without (sensor) (accelmon_device_temperature_celsius) > ignoring (threshold) '
     '(accelmon_device_temperature_threshold_celsius{threshold="slowdown"} - 5)',
     "5m", "warning",
     "device %s on %s is within 5 °C of its slowdown temperature" % (L % "device", L % "node"),
     "Device %s (%s) on %s is at %s °C, within 5 °C of the temperature where it slows down." % (
         L % "device", L % "model", L % "node", V)),
    ("AccelmonDeviceMemoryNearlyFull", "accelmon_device_memory_used_bytes / (accelmon_device_memory_total_bytes > 0) > 0.95",
     "10m", "warning",
     "device %s on %s has less than 5%% of its memory free" % (L % "device", L % "node"),
     "Device %s (%s) on %s has used %s of its memory for 10 minutes; the next large allocation may fail." % (
         L % "device", L % "model", L % "node", "{{ $value | humanizePercentage }}")),
    ("AccelmonDeviceLinkDown", "accelmon_device_link_up == 0", "1m", "critical",
     "link %s of device %s on %s is down" % (L % "link", L % "device", L % "node"),
     "Link %s (%s, peer %s) of device %s on %s has been down for a minute. Collectives over it stall "
     "or fall back to slower paths." % (L % "link", L % "kind", L % "peer", L % "device", L % "node")),
    ("AccelmonDeviceDown", "accelmon_device_up == 0", "1m", "critical",
     "device %s on %s does not answer" % (L % "device", L % "node"),
     "Device %s (%s, uuid %s) on %s has not answered its driver for a minute." % (
         L % "device", L % "model", L % "uuid", L % "node")),
    ("AccelmonDeviceRowRemapFailure", "accelmon_device_remapped_rows_failure == 1", "0s", "critical",
     "device %s on %s failed to remap a memory row" % (L % "device", L % "node"),
     "Device %s (%s, uuid %s) on %s could not remap a row after memory errors: its memory can no "
     "longer be repaired in the field. Drain the node and have the GPU replaced." % (
         L % "device", L % "model", L % "uuid", L % "node")),
    ("AccelmonDeviceResetPending",
     "accelmon_device_remapped_rows_pending == 1 or accelmon_device_retired_pages_pending == 1",
     "10m", "warning",
     "device %s on %s waits for a reset to repair its memory" % (L % "device", L % "node"),
     "Device %s (%s) on %s has remapped a row or retired a page after memory errors, which takes "
     "effect only at the next GPU reset or driver reload. Until then the faulty memory stays in "
     "use: drain the node when its job allows and reset the GPU." % (
         L % "device", L % "model", L % "node")),
    ("AccelmonDeviceThermalViolation",
     'rate(accelmon_device_clock_violation_seconds_total{reason="thermal"}[5m]) > 0.1',
     "10m", "warning",
     "device %s on %s is held back by heat" % (L % "device", L % "node"),
     "Device %s (%s) on %s has run below its application clocks because of temperature for %s of "
     "the time over 10 minutes (the driver's violation counter, which also counts throttling "
     "between two collections)." % (
         L % "device", L % "model", L % "node", "{{ $value | humanizePercentage }}")),
    ("AccelmonExporterRejectingReports", "sum by (job, instance, reason) (rate(accelmon_exporter_reports_rejected_total[5m])) > 0",
     "5m", "warning",
     "accelmon exporter %s rejects reports (%s)" % (L % "instance", L % "reason"),
     "The exporter at %s has refused reports with reason %s for 5 minutes; those nodes' telemetry "
     "is lost." % (L % "instance", L % "reason")),
    ("AccelmonExporterRecordingErrors", "increase(accelmon_exporter_record_errors_total[10m]) > 0", "0s", "warning",
     "accelmon exporter %s fails to write its flight recording" % (L % "instance"),
     "Writes or syncs of the flight recording failed in the last 10 minutes on %s; while "
     "accelmon_exporter_recording_failing is 1 no report is acknowledged and the agents' spools "
     "grow." % (L % "instance")),
    ("AccelmonJobIdleWithMemoryHeld",
     'max by (job_id) (accelmon_job_utilization_ratio{stat="max"}) < 0.05 and on (job_id) '
     'min by (job_id) (accelmon_device_memory_used_bytes / (accelmon_device_memory_total_bytes > 0)' + JOIN_JOB + ') > 0.05',
     "10m", "warning",
     "job %s is idle on every device with its memory held" % (L % "job_id"),
     "Every device of job %s has been below 5%% compute utilization for 10 minutes while each still "
     "holds more than 5%% of its memory: the job is alive but makes no progress (a collective waiting "
     "for a rank that never arrives)." % (L % "job_id")),
    ("AccelmonDiagnosticsStalled",
     "rate(accelmon_exporter_diagnosis_reports_total[5m]) == 0 and rate(accelmon_exporter_reports_ingested_total[5m]) > 0",
     "10m", "warning",
     "accelmon exporter %s ingests reports but diagnoses none" % (L % "instance"),
     "The diagnostics engine of %s has processed no report for 10 minutes while reports arrive: "
     "no diagnosis alert can fire." % (L % "instance")),
]


# ---------------------------------------------------------------------------------------------
# Job-wide rules over the global store (dashboards/prometheus/jobs.yml, group accelmon.jobs): the
# diagnostics engine's job_straggler and job_stall (docs/diagnostics.md) in PromQL, for a job
# whose nodes stream to several exporters, where no single exporter's engine sees the whole job.
# They read the per-device series every exporter serves, through a store that holds all of them
# (VictoriaMetrics with vmalert, or one Prometheus): docs/scaling.md says how to run them and what
# they match of the built-in rules. Thresholds are the built-in ones, read from
# diagnostics/defaults.yaml so the two never drift apart. Only PromQL that Prometheus 2.42 and
# vmalert's MetricsQL both accept (tests/e2e/job_across_exporters_test.sh runs vmalert on them).


def builtin_thresholds(rule):
    """rules.RULE's scalar settings from diagnostics/defaults.yaml, as strings (no YAML parser:
    the file is two-space block YAML with one `key: value  # comment` per line)."""
    out, inside = {}, False
    with open(os.path.join(REPO, "diagnostics", "defaults.yaml"), encoding="utf-8") as f:
        for line in f:
            if re.match(r"^  %s:\s*$" % re.escape(rule), line):
                inside = True
            elif inside and re.match(r"^ {0,2}\S", line):
                break
            elif inside:
                m = re.match(r"^    ([a-z_]+): *([^#\s]+)", line)
                if m:
                    out[m.group(1)] = m.group(2)
    if not out:
        sys.exit("diagnostics/defaults.yaml: no rules.%s section" % rule)
    return out


STALL = builtin_thresholds("job_stall")
STRAGGLER = builtin_thresholds("job_straggler")

# A device of a job, once per exporter that serves it live: accelmon_device_job (job_id, rank)
# where that exporter's accelmon_node_up is 1. A node that moved to another exporter stays on the
# old one, frozen, until --node.expire-after: it drops out here once the old exporter marks it
# down (three missed intervals), and every per-rank series below takes the max over exporters
# (`max by (job_id, rank, node, device)`), so a frozen copy never lowers a rank (a frozen counter
# has a rate of 0, the live copy's rate wins) nor counts it twice.
JOB_LIVE = ("(max by (instance, node, device, job_id, rank) (accelmon_device_job)"
            " and on (instance, node) accelmon_node_up == 1)")
RANK = "job_id, rank, node, device"
ON_RANK = "on (%s)" % RANK


def per_rank(by_device):
    """A series already reduced to one per (instance, node, device), joined to the device's job
    and rank, then one per rank over every exporter."""
    return "max by (%s) (%s * on (instance, node, device) group_left (job_id, rank) %s)" % (
        RANK, by_device, JOB_LIVE)


LINK_RATE = "rate(accelmon_device_link_transmit_bytes_total[1m]) + rate(accelmon_device_link_receive_bytes_total[1m])"
LINK_IRATE = "irate(accelmon_device_link_transmit_bytes_total[1m]) + irate(accelmon_device_link_receive_bytes_total[1m])"
STEP_RATE = "accelmon:job_rank_step_rate:rate1m"
COMPUTE = "accelmon:job_rank_compute_utilization_ratio:max"
LINKS = "accelmon:job_rank_link_traffic_bytes_per_second:rate1m"
LINK_SHARE = "accelmon:job_rank_link_utilization:max_ratio_irate1m"
MEMORY = "accelmon:job_rank_memory_used_bytes:max"
RANKS = "accelmon:job_ranks:count"
NODES = "accelmon:job_nodes:count"
PROGRESS = "accelmon:job_rank_progress:by_measure"
RATIO = "accelmon:job_rank_progress:ratio_to_median"


def every_rank(series):
    """series, for the jobs where every rank has it (the built-in rule's choice of measure)."""
    return "(%s and on (job_id) (count by (job_id) (%s) == on (job_id) %s))" % (series, series, RANKS)


def measure(series, name):
    return 'label_replace(%s, "measure", "%s", "", "")' % (series, name)


# "Was busy": the rank's compute reached busy_ratio within the last hour (the built-in rule
# remembers it until the job ends; a stall longer than this window falls out of the alert).
BUSY_BEFORE = "max_over_time(%s[1h]) >= %s" % (COMPUTE, STALL["busy_ratio"])

JOB_RECORDING = [
    # Per rank (labels job_id, rank, node, device), the max over exporters.
    (STEP_RATE, per_rank("sum by (instance, node, device) (rate(accelmon_process_training_steps_total[1m]))")),
    (COMPUTE, per_rank('max by (instance, node, device) (accelmon_device_utilization_ratio{kind="compute"})')),
    (LINKS, per_rank("sum by (instance, node, device) (%s)" % LINK_RATE)),
    # The busiest link's tx+rx over its capacity (silent: under silent_link_share); irate, so a
    # link that fell silent shows as silent one scrape later, as the built-in rule sees it.
    (LINK_SHARE, per_rank("max by (instance, node, device) ((%s) / (accelmon_device_link_max_bandwidth_bytes_per_second > 0))"
                          % LINK_IRATE)),
    (MEMORY, per_rank("max by (instance, node, device) (accelmon_device_memory_used_bytes)")),
    # Per job.
    (RANKS, "count by (job_id) (max by (%s) %s)" % (RANK, JOB_LIVE)),
    (NODES, "count by (job_id) (count by (job_id, node) %s)" % JOB_LIVE),
    ("accelmon:job_compute_utilization_ratio:median", "quantile by (job_id) (0.5, %s)" % COMPUTE),
    # What the straggler is judged on, per job: the step rate when every rank pushes steps, else
    # compute when every rank reports it, else link traffic; the label `measure` says which.
    (PROGRESS, " or ".join([
        measure(every_rank(STEP_RATE), "step_rate"),
        measure("%s unless on (job_id) %s" % (every_rank(COMPUTE), every_rank(STEP_RATE)), "compute_ratio"),
        measure("%s unless on (job_id) (%s or %s)" % (LINKS, every_rank(STEP_RATE), every_rank(COMPUTE)),
                "link_bytes_per_second"),
    ])),
    (RATIO, "%s / on (job_id) group_left () (quantile by (job_id) (0.5, %s) > 0)" % (PROGRESS, PROGRESS)),
]

# A rank that stalled: idle now, busy before, no link busy (a device without link counters is not
# judged on links, as in the built-in rule), memory not freed below memory_kept_share of its
# recent peak (absent memory: unknown, never freed).
STALLED_RANKS = ("%s < %s and %s (%s) unless %s %s >= %s unless %s %s < %s * max_over_time(%s[15m])" % (
    COMPUTE, STALL["idle_ratio"], ON_RANK, BUSY_BEFORE, ON_RANK, LINK_SHARE, STALL["silent_link_share"],
    ON_RANK, MEMORY, STALL["memory_kept_share"], MEMORY))
BUSY_RANKS = "%s and %s (%s)" % (COMPUTE, ON_RANK, BUSY_BEFORE)
NODES_OF_JOB = '{{ with printf "%s{job_id=%%q}" $labels.job_id | query }}{{ . | first | value }}{{ end }}' % NODES

JOB_ALERTS = [
    # name, expr, for, severity, summary, description
    ("AccelmonJobStragglerAcrossExporters",
     "%s < %s and on (job_id) %s >= %s and on (job_id) accelmon:job_compute_utilization_ratio:median >= %s" % (
         RATIO, STRAGGLER["ratio"], RANKS, STRAGGLER["min_ranks"], STRAGGLER["min_busy_ratio"]),
     STRAGGLER["for"], "warning",
     "job %s: rank %s (%s device %s) at %s of the job's median %s — straggler" % (
         L % "job_id", L % "rank", L % "node", L % "device", "{{ $value | humanizePercentage }}", L % "measure"),
     "Rank %s of job %s, device %s of %s, has run under %s of the job's median %s for %s, over every "
     "exporter's series (the built-in job_straggler, in PromQL). Every other rank waits for it in "
     "each collective." % (L % "rank", L % "job_id", L % "device", L % "node",
                           "%d%%" % round(100 * float(STRAGGLER["ratio"])), L % "measure", STRAGGLER["for"])),
    ("AccelmonJobStallAcrossExporters",
     "count by (job_id) (%s) == on (job_id) count by (job_id) (%s)" % (STALLED_RANKS, BUSY_RANKS),
     STALL["for"], "critical",
     "job %s: all %s busy devices on %s nodes idle with memory held, links silent — hung collective?" % (
         L % "job_id", "{{ $value }}", NODES_OF_JOB),
     "Every device of job %s that was busy, on all its nodes and whichever exporter serves them, has "
     "been under %s compute utilization for %s with silent links while its memory stays allocated "
     "(the built-in job_stall, in PromQL): the ranks are alive but wait, typically in a collective "
     "for a peer that never arrives. `accelmon diagnose` over the exporters' recordings names the "
     "node that went idle first and the first fault." % (
         L % "job_id", "%d%%" % round(100 * float(STALL["idle_ratio"])), STALL["for"])),
]


def job_rules():
    rules = [{"record": r, "expr": e} for r, e in JOB_RECORDING]
    rules += [raw_alert(*a) for a in JOB_ALERTS]
    return {"groups": [{"name": "accelmon.jobs", "rules": rules}]}


# One alert per incident (docs/runbooks.md): a symptom of a job (it stalls, straggles, slows
# down) that likely follows from a fault of the same job (consequence_of) does not page while
# that first fault is open on the same exporter; the fault's alert lists it. Faults themselves
# (a link down, old firmware, ECC errors, ...) always page: their first-fault link is only
# timing, and hiding one would hide a second problem.
SYMPTOMS = ("job_stall", "job_straggler", "throughput_drop", "low_sm_activity")
CONSEQUENCES = ('{{ with query (printf "accelmon_diagnosis_active{consequence_of=%q}" $labels.finding) }}'
                ' Likely consequences: {{ range sortByLabel "finding" . }}{{ .Labels.rule }} on {{ .Labels.node }}'
                '{{ if .Labels.device }} device {{ .Labels.device }}{{ end }}; {{ end }}{{ end }}')


def diagnosis_alert(rule, name, meaning):
    selected = 'accelmon_diagnosis_active{rule="%s"}' % rule
    if rule in SYMPTOMS:
        selected += (' unless on (instance, consequence_of) label_replace(accelmon_diagnosis_active, '
                     '"consequence_of", "$1", "finding", "(.+)")')
    return {
        "alert": name,
        # job_id: the finding's job; finding: its name, which its consequences' consequence_of
        # gives (and the description's list of them reads).
        "expr": 'max by (node, device, link, rule, severity, job_id, finding) (%s) == 1' % selected,
        "labels": {"source": "accelmon_diagnostics"},
        "annotations": {
            "summary": "%s on %s%s%s" % (rule, L % "node",
                                         "{{ if $labels.device }} device {{ $labels.device }}{{ end }}",
                                         "{{ if $labels.link }} link {{ $labels.link }}{{ end }}"),
            "description": "accelmon diagnostics: %s (%s, severity %s). The evidence is in the exporter's log, "
                           "`accelmon diagnose` and the Query API; what to do: %s#%s.%s" % (
                               meaning, rule, L % "severity", DIAGNOSTICS_DOC, rule, CONSEQUENCES),
            "runbook_url": "%s#%s" % (RUNBOOK_BASE, name.lower()),
        },
    }


def raw_alert(name, expr, for_, severity, summary, description):
    rule = {"alert": name, "expr": expr}
    if for_ != "0s":
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description,
                           "runbook_url": "%s#%s" % (RUNBOOK_BASE, name.lower())}
    return rule


def alert_rules():
    return {"groups": [
        {"name": "accelmon.diagnostics",
         "rules": [diagnosis_alert(*r) for r in DIAGNOSIS_RULES]},
        {"name": "accelmon.metrics", "rules": [raw_alert(*a) for a in RAW_ALERTS]},
    ]}


def recording_rules():
    return {"groups": [{"name": "accelmon.recording",
                        "rules": [{"record": r, "expr": e} for r, e in RECORDING]}]}


def prometheus_rule():
    """The Prometheus operator's PrometheusRule: alerts.yml's, recording.yml's and jobs.yml's groups, as they are."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "accelmon", "labels": {"app.kubernetes.io/component": "rules"}},
        "spec": {"groups": alert_rules()["groups"] + recording_rules()["groups"] + job_rules()["groups"]},
    }


def diagnosis_alert_tests():
    """promtool test rules cases: each diagnosis alert fires with the finding's labels, and does
    not fire for another rule's finding."""
    tests = []
    for i, (rule, name, _) in enumerate(DIAGNOSIS_RULES):
        severity = "critical" if i % 2 else "warning"
        link = "nvlink0" if rule.startswith("link_") else ""
        device = "" if rule == "host_oom_kill" else str(i % 8)
        other = DIAGNOSIS_RULES[(i + 1) % len(DIAGNOSIS_RULES)][0]
        series = 'accelmon_diagnosis_active{rule="%s",node="n1",device="%s",link="%s",severity="%s",finding="%s",job="accelmon",instance="e:9477"}'
        meaning = DIAGNOSIS_RULES[i][2]
        ann = diagnosis_alert(rule, name, meaning)["annotations"]
        finding = "%s on n1%s" % (rule, " device " + device if device else "")
        other_finding = "%s on n1%s" % (other, " device " + device if device else "")
        exp_labels = {"node": "n1", "device": device, "link": link, "rule": rule,
                      "severity": severity, "finding": finding, "source": "accelmon_diagnostics"}
        exp_labels = {k: v for k, v in exp_labels.items() if v != ""}
        tests.append({
            "interval": "1m",
            "input_series": [
                {"series": series % (rule, device, link, severity, finding), "values": "_ 1 1 stale"},
                {"series": series % (other, device, link, severity, other_finding), "values": "1 1 1 1"},
            ],
            "alert_rule_test": [
                # Another rule's finding never trips this alert.
                {"eval_time": "0m", "alertname": name, "exp_alerts": []},
                {"eval_time": "2m", "alertname": name, "exp_alerts": [{
                    "exp_labels": exp_labels,
                    "exp_annotations": {
                        "summary": "%s on n1%s%s" % (rule, " device " + device if device else "",
                                                " link " + link if link else ""),
                        # No consequences listed: none names it.
                        "description": ann["description"].replace(L % "severity", severity).replace(CONSEQUENCES, ""),
                        "runbook_url": ann["runbook_url"],
                    }}]},
                # The finding closed: its series is gone, and the alert with it.
                {"eval_time": "3m", "alertname": name, "exp_alerts": []},
            ],
        })
    return {"rule_files": ["../alerts.yml"], "evaluation_interval": "1m", "tests": tests}


# ---------------------------------------------------------------------------------------------
# Dashboards. A panel: title, kind, targets [(expr, legend)], unit, width; `empty_ok` names why a
# panel may legitimately return no data in the e2e (a standalone --sim run with a fault scenario);
# it is the e2e's whole exemption list (`--list-queries` prints it), and it lands in the panel's
# description so a user sees it too. Keep it short: every other panel's every query must return
# data there. Today: the two link-error panels (the simulator counts no link errors).

DS = {"type": "prometheus", "uid": "${datasource}"}
SEL_NODES = 'node=~"$node"'
SEL_DEVS = 'node=~"$node",device=~"$device"'
SEL_NODE = 'node="$node"'
SEL_DEV = 'node="$node",device="$device"'
SEL_JOB = 'job_id="$job"'
# The job's open findings: those that carry the job, and those on one of its devices.
JOB_FINDINGS = ('accelmon_diagnosis_active{%s} or (accelmon_diagnosis_active * on (instance, node, device) '
                'group_left (job_id) accelmon_device_job{%s})' % (SEL_JOB, SEL_JOB))
NO_STEPS = "the job's training processes push no step counter (accelmon_push steps)"
NO_GPM = ("the GPUs report no profiling counters (NVIDIA before Hopper, the simulator; AMD only its "
          "engine and memory-controller activity, Ascend only its vector cores)")


def panel(title, kind, targets, unit=None, w=12, h=8, description="", table=False, empty_ok=None,
          max_=None, min_=None):
    return {"title": title, "kind": kind, "targets": targets, "unit": unit, "w": w, "h": h,
            "description": description, "table": table, "empty_ok": empty_ok, "max": max_, "min": min_}


def row(title):
    return {"row": title}


FLEET = [
    row("Fleet"),
    panel("Nodes up", "stat", [("sum(accelmon_node_up{%s})" % SEL_NODES, "")], w=4, h=4),
    panel("Nodes down", "stat", [("count(accelmon_node_up{%s} == 0) or vector(0)" % SEL_NODES, "")], w=4, h=4),
    panel("Devices", "stat", [("count(accelmon_device_info{%s})" % SEL_DEVS, "")], w=4, h=4),
    panel("Devices lost", "stat", [("count(accelmon_device_up{%s} == 0) or vector(0)" % SEL_DEVS, "")], w=4, h=4),
    panel("Open diagnoses", "stat", [("count(accelmon_diagnosis_active{%s}) or vector(0)" % SEL_NODES, "")], w=4, h=4),
    panel("Fleet device memory used", "gauge", [("accelmon:fleet_device_memory_used:ratio", "")],
          unit="percentunit", w=4, h=4, min_=0, max_=1,
          description="All devices of every node (not filtered by $node): sum used / sum total."),
    row("Memory"),
    panel("Device memory used (node × device)", "status-history",
          [("accelmon:device_memory_used:ratio{%s}" % SEL_DEVS, "{{node}}/{{device}}")],
          unit="percentunit", min_=0, max_=1,
          description="One row per device: memory used over total. Drill down with the node and device dashboards."),
    panel("Device memory fragmentation (node × device)", "status-history",
          [("accelmon_device_memory_fragmentation_ratio{%s}" % SEL_DEVS, "{{node}}/{{device}}")],
          unit="percentunit", min_=0, max_=1,
          description="1 - largest free block / free memory. High values with ample free memory are how a "
                      "fragmentation OOM looks before it happens."),
    panel("Device memory used by node", "timeseries",
          [("accelmon:node_device_memory_used_bytes:sum{%s}" % SEL_NODES, "{{node}} used"),
           ("accelmon:node_device_memory_total_bytes:sum{%s}" % SEL_NODES, "{{node}} total")], unit="bytes"),
    panel("Worst fragmentation by node", "timeseries",
          [("accelmon:node_device_memory_fragmentation:max{%s}" % SEL_NODES, "{{node}}")],
          unit="percentunit", min_=0, max_=1),
    row("Temperature and links"),
    panel("Device temperature (hottest sensor)", "timeseries",
          [("max by (node, device) (accelmon_device_temperature_celsius{%s})" % SEL_DEVS, "{{node}}/{{device}}")],
          unit="celsius"),
    panel("Link bandwidth, share of capacity (average per node)", "timeseries",
          [("accelmon:node_device_link_utilization:avg_ratio_rate1m{%s}" % SEL_NODES, "{{node}}")],
          unit="percentunit", min_=0, max_=1,
          description="(transmit + receive rate) / (2 × max bandwidth) of every device link, averaged per node."),
    panel("Busiest links", "table",
          [("topk(10, accelmon:device_link_utilization:ratio_rate1m{%s})" % SEL_DEVS, "")],
          unit="percentunit", table=True),
    panel("Throttled devices", "timeseries",
          [("sum by (node, device) (accelmon_device_throttled{%s})" % SEL_DEVS, "{{node}}/{{device}}")],
          description="Number of throttle reasons active per device."),
    row("Findings and inventory"),
    panel("Active diagnoses", "table",
          [("accelmon_diagnosis_active{%s}" % SEL_NODES, "")], table=True, w=24),
    panel("Firmware drift: devices per model and firmware", "table",
          [("count by (vendor, model, firmware, driver) (accelmon_device_info{%s})" % SEL_DEVS, "")], table=True),
    panel("Firmware versions per model", "stat",
          [("count by (vendor, model) (count by (vendor, model, firmware) (accelmon_device_info{%s}))" % SEL_DEVS,
            "{{vendor}} {{model}}")],
          description="More than 1 means the fleet runs mixed firmware for that model."),
    panel("Exporter: reports per second", "timeseries",
          [("sum by (instance) (rate(accelmon_exporter_reports_ingested_total[$__rate_interval]))", "{{instance}} ingested"),
           # The rejected counter has series only once a report was refused: 0 until then.
           ("sum by (instance) (rate(accelmon_exporter_reports_rejected_total[$__rate_interval]))"
            " or 0 * sum by (instance) (rate(accelmon_exporter_reports_ingested_total[$__rate_interval]))",
            "{{instance}} rejected")],
          unit="reqps"),
]

NODE = [
    row("Node"),
    panel("Node up", "stat", [("accelmon_node_up{%s}" % SEL_NODE, "")], w=6, h=4),
    panel("Seconds since the last report", "stat",
          [("time() - accelmon_node_last_report_timestamp_seconds{%s}" % SEL_NODE, "")], unit="s", w=6, h=4),
    panel("Reports waiting in the agent's spool", "stat", [("accelmon_agent_spool_reports{%s}" % SEL_NODE, "")], w=6, h=4),
    panel("Reports dropped by the agent (1 h)", "stat",
          [("increase(accelmon_agent_dropped_reports_total{%s}[1h])" % SEL_NODE, "")], w=6, h=4),
    row("Devices"),
    panel("Device memory used", "timeseries",
          [("accelmon_device_memory_used_bytes{%s,device=~\"$device\"}" % SEL_NODE, "{{device}}")], unit="bytes"),
    panel("Device memory fragmentation", "timeseries",
          [("accelmon_device_memory_fragmentation_ratio{%s,device=~\"$device\"}" % SEL_NODE, "{{device}}")],
          unit="percentunit", min_=0, max_=1),
    panel("Device temperature", "timeseries",
          [("accelmon_device_temperature_celsius{%s,device=~\"$device\"}" % SEL_NODE, "{{device}} {{sensor}}")],
          unit="celsius"),
    panel("Device power", "timeseries",
          [("accelmon_device_power_watts{%s,device=~\"$device\"}" % SEL_NODE, "{{device}}")], unit="watt"),
    panel("Device compute utilization", "timeseries",
          [("accelmon_device_utilization_ratio{%s,device=~\"$device\",kind=\"compute\"}" % SEL_NODE, "{{device}}")],
          unit="percentunit", min_=0, max_=1),
    panel("Device link utilization", "timeseries",
          [("accelmon:device_link_utilization:ratio_rate1m{%s,device=~\"$device\"}" % SEL_NODE, "{{device}} {{link}}")],
          unit="percentunit", min_=0, max_=1),
    panel("Device links", "table",
          [("accelmon_device_link_up{%s,device=~\"$device\"}" % SEL_NODE, "")], table=True,
          description="Every link of every device: 1 up, 0 down; kind and peer as columns."),
    panel("Open findings on this node", "table",
          [("accelmon_diagnosis_active{%s}" % SEL_NODE, "")], table=True),
    row("Host"),
    panel("Host links: throughput", "timeseries",
          [("rate(accelmon_host_link_receive_bytes_total{%s}[$__rate_interval])" % SEL_NODE, "{{link}} rx"),
           ("rate(accelmon_host_link_transmit_bytes_total{%s}[$__rate_interval])" % SEL_NODE, "{{link}} tx")],
          unit="Bps"),
    panel("Host links", "table",
          [("accelmon_host_link_up{%s}" % SEL_NODE, "")], table=True),
    panel("Host memory available", "timeseries",
          [("accelmon_host_memory_available_bytes{%s} / accelmon_host_memory_total_bytes{%s}" % (SEL_NODE, SEL_NODE),
            "available")], unit="percentunit", min_=0, max_=1),
    panel("Host memory pressure (PSI stall share)", "timeseries",
          [("rate(accelmon_host_memory_pressure_seconds_total{%s}[$__rate_interval])" % SEL_NODE, "{{kind}}")],
          unit="percentunit"),
    panel("OOM kills (1 h)", "timeseries",
          [("increase(accelmon_host_oom_kills_total{%s}[1h])" % SEL_NODE, "OOM kills")]),
    panel("Host memory unusable for 2 MiB blocks", "timeseries",
          [("accelmon_host_memory_unusable_free_ratio{%s,order=\"9\"}" % SEL_NODE, "numa {{numa_node}} {{zone}}")],
          unit="percentunit", min_=0, max_=1,
          description="Unusable free space index at order 9 (2 MiB with 4 KiB pages): host memory fragmentation."),
    panel("Host temperature", "timeseries",
          [("accelmon_host_temperature_celsius{%s}" % SEL_NODE, "{{chip}} {{sensor}}")], unit="celsius"),
    panel("Collectors", "table",
          [("accelmon_agent_collector_success{%s}" % SEL_NODE, ""),
           ("accelmon_agent_collector_duration_seconds{%s}" % SEL_NODE, "")], table=True,
          description="Each collector's latest run: success (0 = failed to read its source) and duration."),
]

DEVICE = [
    row("Memory"),
    panel("Device memory", "timeseries",
          [("accelmon_device_memory_total_bytes{%s}" % SEL_DEV, "total"),
           ("accelmon_device_memory_used_bytes{%s}" % SEL_DEV, "used"),
           ("accelmon_device_memory_reserved_bytes{%s}" % SEL_DEV, "reserved"),
           ("accelmon_device_memory_largest_free_block_bytes{%s}" % SEL_DEV, "largest free block")], unit="bytes"),
    panel("Fragmentation", "timeseries",
          [("accelmon_device_memory_fragmentation_ratio{%s}" % SEL_DEV, "1 - largest free block / free")],
          unit="percentunit", min_=0, max_=1),
    panel("Per-process allocator memory", "timeseries",
          [("accelmon_process_memory_reserved_bytes{%s}" % SEL_DEV, "pid {{pid}} {{job_id}}/{{rank}} reserved"),
           ("accelmon_process_memory_allocated_bytes{%s}" % SEL_DEV, "pid {{pid}} {{job_id}}/{{rank}} allocated")],
          unit="bytes", description="Training processes pushing allocator statistics (accelmon_push; the simulator "
                                    "simulates one per device)."),
    panel("Per-process allocator OOMs and retries (1 h)", "timeseries",
          [("increase(accelmon_process_allocator_ooms_total{%s}[1h])" % SEL_DEV, "pid {{pid}} OOMs"),
           ("increase(accelmon_process_allocator_retries_total{%s}[1h])" % SEL_DEV, "pid {{pid}} retries")]),
    row("Thermal and power"),
    panel("Temperature and thresholds", "timeseries",
          [("accelmon_device_temperature_celsius{%s}" % SEL_DEV, "{{sensor}}"),
           ("accelmon_device_temperature_threshold_celsius{%s}" % SEL_DEV, "{{threshold}} threshold")],
          unit="celsius"),
    panel("Throttle reasons", "status-history",
          [("accelmon_device_throttled{%s}" % SEL_DEV, "{{reason}}")]),
    panel("Power", "timeseries",
          [("accelmon_device_power_watts{%s}" % SEL_DEV, "draw"),
           ("accelmon_device_power_limit_watts{%s}" % SEL_DEV, "limit")], unit="watt"),
    panel("Utilization", "timeseries",
          [("accelmon_device_utilization_ratio{%s}" % SEL_DEV, "{{kind}}")], unit="percentunit", min_=0, max_=1),
    panel("SM, tensor and DRAM activity", "timeseries",
          [('accelmon_device_activity_ratio{%s,kind=~"sm|sm_occupancy|tensor|dram_bandwidth|vector"}'
            % SEL_DEV,
            "{{kind}}")], unit="percentunit", min_=0, max_=1,
          description="Profiling counters over each collection interval: how busy the SMs, tensor cores and "
                      "DRAM (Ascend: the vector cores) really were. 'Utilization' only says that a kernel ran.",
          empty_ok=NO_GPM),
    panel("Pipes", "timeseries",
          [('accelmon_device_activity_ratio{%s,kind=~"tensor_.*|fp64|fp32|fp16|integer"}' % SEL_DEV,
            "{{kind}}")], unit="percentunit", min_=0, max_=1, empty_ok=NO_GPM),
    panel("Compute dies (AMD XCD)", "timeseries",
          [("accelmon_device_compute_die_activity_ratio{%s}" % SEL_DEV, "XCD {{die}}")],
          unit="percentunit", min_=0, max_=1,
          description="Each compute die's busy share (amdgpu gpu_metrics): one idle XCD of eight "
                      "is a skewed partition or a stuck queue that the device average hides.",
          empty_ok="only AMD MI300-class GPUs with gpu_metrics v1.6 or later report per-die activity"),
    panel("MIG devices of this GPU: memory used", "timeseries",
          [('accelmon_device_memory_used_bytes * on (node, device) group_left (gpu_instance, profile) '
            'accelmon_device_mig_info{node="$node",parent_device="$device"}',
            "GI {{gpu_instance}} {{profile}} (device {{device}})")],
          unit="bytes",
          description="Each MIG device of this GPU reports as a device of its own (index 100 x (GPU + 1) "
                      "+ slot); pick one as the device to see its activity.",
          empty_ok="no GPU is in MIG mode (the test library and the simulator partition none by default)"),
    panel("Bus traffic (GPM)", "timeseries",
          [("accelmon_device_bus_bytes_per_second{%s}" % SEL_DEV, "{{bus}} {{direction}}")], unit="Bps",
          empty_ok=NO_GPM),
    panel("Clocks", "timeseries",
          [("accelmon_device_clock_hertz{%s}" % SEL_DEV, "{{kind}}")], unit="hertz"),
    panel("ECC errors (1 h)", "timeseries",
          [("increase(accelmon_device_ecc_errors_total{%s}[1h])" % SEL_DEV, "{{type}}"),
           ("increase(accelmon_device_ecc_errors_by_location_total{%s}[1h])" % SEL_DEV,
            "{{location}} {{type}}")],
          description="Totals, and where they were counted where the device says: uncorrectable "
                      "errors in dram are what row remapping repairs; in sram (on-chip) they want a "
                      "GPU reset, and the board's replacement if they repeat."),
    panel("Time held below application clocks", "timeseries",
          [("rate(accelmon_device_clock_violation_seconds_total{%s}[$__rate_interval])" % SEL_DEV,
            "{{reason}}")], unit="percentunit", min_=0, max_=1,
          description="Share of time the driver held the clocks below their target, by limiter "
                      "(NVML violation counters: throttling between two collections counts too).",
          empty_ok="only NVIDIA GPUs report violation counters (not AMD, Ascend or the simulator)"),
    panel("Memory repair and state", "table",
          [("accelmon_device_retired_pages{%s}" % SEL_DEV, ""),
           ("accelmon_device_retired_pages_pending{%s}" % SEL_DEV, ""),
           ("accelmon_device_remapped_rows_pending{%s}" % SEL_DEV, ""),
           ("accelmon_device_remapped_rows_failure{%s}" % SEL_DEV, ""),
           ("accelmon_device_performance_state{%s}" % SEL_DEV, "")], table=True,
          description="Retired pages by cause, and whether a page retirement or row remap waits for "
                      "a reset (1) or failed (remap failure 1: the GPU needs service).",
          empty_ok="only NVIDIA GPUs report page retirement, row remapping and performance states"),
    row("Links"),
    panel("Link utilization", "timeseries",
          [("accelmon:device_link_utilization:ratio_rate1m{%s}" % SEL_DEV, "{{link}} ({{kind}} → {{peer}})")],
          unit="percentunit", min_=0, max_=1),
    panel("Link throughput", "timeseries",
          [("rate(accelmon_device_link_transmit_bytes_total{%s}[$__rate_interval])" % SEL_DEV, "{{link}} tx"),
           ("rate(accelmon_device_link_receive_bytes_total{%s}[$__rate_interval])" % SEL_DEV, "{{link}} rx")],
          unit="Bps"),
    panel("Links", "table",
          [("accelmon_device_link_up{%s}" % SEL_DEV, ""),
           ("accelmon_device_link_max_bandwidth_bytes_per_second{%s}" % SEL_DEV, "")], table=True),
    panel("Link errors", "timeseries",
          [("rate(accelmon_device_link_errors_total{%s}[$__rate_interval])" % SEL_DEV, "{{link}} {{type}}")],
          empty_ok="only devices whose driver counts link errors (not the simulator)"),
    row("Findings"),
    panel("Open findings on this device", "table",
          [("accelmon_diagnosis_active{%s}" % SEL_DEV, "")], table=True, w=24),
    row("Holders"),
    panel("Who holds this device", "table",
          [("accelmon_device_job_info{%s}" % SEL_DEV, "")], table=True, w=24,
          description="The Kubernetes containers, Slurm steps and other processes using the device, with "
                      "their job; the Job dashboard follows one job across nodes."),
]

JOB = [
    row("Job"),
    panel("Devices", "stat", [("sum(accelmon_job_devices{%s})" % SEL_JOB, "")], w=4, h=4),
    panel("Nodes", "stat", [("sum(accelmon_job_nodes{%s})" % SEL_JOB, "")], w=4, h=4),
    panel("Median compute utilization", "stat",
          [('max(accelmon_job_utilization_ratio{%s,stat="median"})' % SEL_JOB, "")],
          unit="percentunit", w=4, h=4),
    panel("Median SM activity", "stat",
          [('quantile(0.5, accelmon_device_activity_ratio{kind="sm"}' + JOIN_JOB + ' and on (job_id) '
            'accelmon_device_job{%s})' % SEL_JOB, "")],
          unit="percentunit", w=4, h=4, empty_ok=NO_GPM,
          description="Half the job's GPUs had their SMs busy less than this: the share of the "
                      "hardware the job really uses."),
    panel("Slowest device's utilization", "stat",
          [('min(accelmon_job_utilization_ratio{%s,stat="min"})' % SEL_JOB, "")],
          unit="percentunit", w=4, h=4),
    panel("Tightest memory headroom", "stat",
          [("accelmon:job_memory_headroom_bytes:min{%s}" % SEL_JOB, "")], unit="bytes", w=4, h=4,
          description="The least free memory of any device of the job."),
    panel("Open findings", "stat", [("count(%s) or vector(0)" % JOB_FINDINGS, "")], w=4, h=4),
    row("Progress"),
    panel("Compute utilization: min, median, max over the job's devices", "timeseries",
          [("accelmon_job_utilization_ratio{%s}" % SEL_JOB, "{{stat}}")], unit="percentunit", min_=0, max_=1,
          description="Computed by the exporter over every node of the job it sees. A min far below the "
                      "median is a straggler."),
    panel("Compute utilization per rank", "timeseries",
          [("accelmon:device_compute_utilization_ratio:by_job{%s}" % SEL_JOB, "{{node}}/{{device}} rank {{rank}}")],
          unit="percentunit", min_=0, max_=1),
    panel("Slowest rank (lowest compute utilization)", "table",
          [("bottomk(1, accelmon:device_compute_utilization_ratio:by_job{%s})" % SEL_JOB, "")],
          unit="percentunit", table=True),
    panel("Step rate: min, median, max over the job's processes", "timeseries",
          [("accelmon_job_step_rate{%s}" % SEL_JOB, "{{stat}}")], unit="none", empty_ok=NO_STEPS,
          description="Training steps per second each process pushed (accelmon_push), over at least 10 s."),
    panel("Slowest rank by step rate", "table",
          [("bottomk(1, rate(accelmon_process_training_steps_total[$__rate_interval]) * on (instance, node, device) "
            "group_left () accelmon_device_job{%s})" % SEL_JOB, "")], table=True, empty_ok=NO_STEPS),
    row("Devices"),
    panel("Devices of the job across nodes", "table",
          [("accelmon_device_job_info{%s}" % SEL_JOB, "")], table=True, w=24,
          description="Every device holder of the job: node, device, uuid, pod, namespace, container, "
                      "Slurm step, user and rank."),
    row("Memory"),
    panel("Memory headroom per device", "timeseries",
          [("accelmon:device_memory_headroom_bytes:by_job{%s}" % SEL_JOB, "{{node}}/{{device}} rank {{rank}}")],
          unit="bytes", description="Total minus used device memory of each device of the job."),
    panel("Device memory per process (driver)", "timeseries",
          [("accelmon_device_process_memory_used_bytes * on (instance, node, device) group_left () "
            "accelmon_device_job{%s}" % SEL_JOB, "{{node}}/{{device}} pid {{pid}}")], unit="bytes"),
    row("Links"),
    panel("Link traffic per device", "timeseries",
          [("accelmon:device_link_traffic_bytes_per_second:by_job{%s}" % SEL_JOB, "{{node}}/{{device}} rank {{rank}}")],
          unit="Bps", description="Transmit plus receive over every link of the device. A rank far below "
                                  "the others is a straggler or a degraded link."),
    panel("Link traffic of the job", "timeseries",
          [("accelmon:job_link_traffic_bytes_per_second:sum{%s}" % SEL_JOB, "all devices")], unit="Bps"),
    row("Findings"),
    panel("Open findings of the job", "table", [(JOB_FINDINGS, "")], table=True, w=24,
          description="Findings that name the job, and findings on any of its devices."),
]

LINKS = [
    row("Device links"),
    panel("Links down", "stat",
          [("count(accelmon_device_link_up{%s} == 0) or vector(0)" % SEL_DEVS, "")], w=6, h=4),
    panel("Links up", "stat", [("count(accelmon_device_link_up{%s} == 1)" % SEL_DEVS, "")], w=6, h=4),
    panel("Link findings open", "stat",
          [("count(accelmon_diagnosis_active{%s,rule=~\"link_.*\"}) or vector(0)" % SEL_NODES, "")], w=6, h=4),
    panel("Fleet average link utilization", "stat",
          [("avg(accelmon:device_link_utilization:ratio_rate1m{%s})" % SEL_DEVS, "")],
          unit="percentunit", w=6, h=4),
    panel("Link utilization per node (average)", "status-history",
          [("accelmon:node_device_link_utilization:avg_ratio_rate1m{%s}" % SEL_NODES, "{{node}}")],
          unit="percentunit", min_=0, max_=1),
    panel("Least used links", "table",
          [("bottomk(20, accelmon:device_link_utilization:ratio_rate1m{%s})" % SEL_DEVS, "")],
          unit="percentunit", table=True,
          description="A link far below its siblings is the sign of a degraded link or a missing layout setting."),
    panel("Per-link utilization", "timeseries",
          [("accelmon:device_link_utilization:ratio_rate1m{%s}" % SEL_DEVS, "{{node}}/{{device}} {{link}}")],
          unit="percentunit", min_=0, max_=1, w=24),
    panel("Down links", "table",
          [("accelmon_device_link_up{%s} == 0" % SEL_DEVS, "")], table=True),
    panel("Down, degraded and flapping links (findings)", "table",
          [("accelmon_diagnosis_active{%s,rule=~\"link_down|link_degraded|link_flapping\"}" % SEL_NODES, "")],
          table=True),
    panel("Link capacity against its best in a day", "timeseries",
          [("accelmon_device_link_max_bandwidth_bytes_per_second{%s} / max_over_time(accelmon_device_link_max_bandwidth_bytes_per_second{%s}[1d])"
            % (SEL_DEVS, SEL_DEVS), "{{node}}/{{device}} {{link}}")],
          unit="percentunit", min_=0, max_=1,
          description="Below 1: the link trained down to a lower speed or width (a degraded link)."),
    panel("Link errors", "timeseries",
          [("sum by (node, device, link, type) (rate(accelmon_device_link_errors_total{%s}[$__rate_interval]))" % SEL_DEVS,
            "{{node}}/{{device}} {{link}} {{type}}")],
          empty_ok="only devices whose driver counts link errors (not the simulator)"),
    row("Host links"),
    panel("Host link utilization", "timeseries",
          [("accelmon:host_link_utilization:ratio_rate1m{%s}" % SEL_NODES, "{{node}} {{link}}")],
          unit="percentunit", min_=0, max_=1),
    panel("Host links down", "table",
          [("accelmon_host_link_up{%s} == 0" % SEL_NODES, "")], table=True,
          description="Empty when every host link is up (ports without a cable show here too)."),
]

DIAGNOSTICS = [
    row("Findings"),
    panel("Critical findings open", "stat",
          [("count(accelmon_diagnosis_active{%s,severity=\"critical\"}) or vector(0)" % SEL_NODES, "")], w=6, h=4),
    panel("Warning findings open", "stat",
          [("count(accelmon_diagnosis_active{%s,severity=\"warning\"}) or vector(0)" % SEL_NODES, "")], w=6, h=4),
    panel("Findings opened (24 h)", "stat",
          [("sum(increase(accelmon_diagnosis_findings_total[1d]))", "")], w=6, h=4,
          description="Every exporter, every node."),
    panel("Reports diagnosed per second", "stat",
          [("sum(rate(accelmon_exporter_diagnosis_reports_total[$__rate_interval]))", "")], unit="reqps", w=6, h=4),
    panel("Open findings", "table", [("accelmon_diagnosis_active{%s}" % SEL_NODES, "")], table=True, w=24),
    panel("Open findings by rule over time", "timeseries",
          [("sum by (rule, severity) (accelmon_diagnosis_active{%s})" % SEL_NODES, "{{rule}} ({{severity}})")]),
    panel("Recent findings: opened per rule (24 h)", "table",
          [("sum by (rule, severity) (increase(accelmon_diagnosis_findings_total[1d]))", "")], table=True),
    row("Inventory"),
    panel("Devices", "table",
          [("accelmon_device_info{%s}" % SEL_DEVS, "")], table=True, w=24,
          description="Every device with its uuid, model, firmware, driver and PCI bus id."),
    panel("Devices by model", "piechart",
          [("count by (vendor, model) (accelmon_device_info{%s})" % SEL_DEVS, "{{vendor}} {{model}}")], w=8),
    panel("Devices by firmware", "piechart",
          [("count by (model, firmware) (accelmon_device_info{%s})" % SEL_DEVS, "{{model}} {{firmware}}")], w=8),
    panel("Devices by driver", "piechart",
          [("count by (model, driver) (accelmon_device_info{%s})" % SEL_DEVS, "{{model}} {{driver}}")], w=8),
    panel("Device memory and health", "table",
          [("accelmon_device_memory_total_bytes{%s}" % SEL_DEVS, ""),
           ("accelmon_device_up{%s}" % SEL_DEVS, "")], table=True),
    panel("Device links and peers", "table",
          [("accelmon_device_link_max_bandwidth_bytes_per_second{%s}" % SEL_DEVS, "")], table=True,
          description="Link topology: each link's kind, peer and capacity."),
]

def variable(name, label, query, multi):
    v = {
        "name": name, "label": label, "type": "query", "datasource": DS,
        "definition": query, "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2, "sort": 3, "multi": multi, "includeAll": multi, "hide": 0, "regex": "",
        "current": {},
    }
    if multi:
        v["allValue"] = ".*"
    return v


def node_device(node_multi, device_multi):
    return [variable("node", "Node", "label_values(accelmon_node_up, node)", node_multi),
            variable("device", "Device", 'label_values(accelmon_device_info{node=~"$node"}, device)', device_multi)]


# The jobs the exporters compute series for (a device's job: its first holder with a job id).
JOB_VARIABLE = [variable("job", "Job", "label_values(accelmon_job_devices, job_id)", False)]

DASHBOARDS = [
    # file, uid, title, variables (besides the data source), panels
    ("fleet-overview", "accelmon-fleet", "accelmon / Fleet overview", node_device(True, True), FLEET),
    ("node-detail", "accelmon-node", "accelmon / Node detail", node_device(False, True), NODE),
    ("device-detail", "accelmon-device", "accelmon / Device detail", node_device(False, False), DEVICE),
    ("links", "accelmon-links", "accelmon / Links", node_device(True, True), LINKS),
    ("diagnostics-inventory", "accelmon-diagnostics", "accelmon / Diagnostics and inventory",
     node_device(True, True), DIAGNOSTICS),
    ("job", "accelmon-job", "accelmon / Job", JOB_VARIABLE, JOB),
]


def dashboard(uid, title, variables, panels):
    templating = [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "hide": 0, "refresh": 1, "regex": "", "current": {}},
    ] + variables
    out, x, y, rowh, pid = [], 0, 0, 0, 1
    for p in panels:
        if "row" in p:
            if x:
                y, x = y + rowh, 0
            out.append({"id": pid, "type": "row", "title": p["row"], "collapsed": False, "panels": [],
                        "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}})
            pid, y, rowh = pid + 1, y + 1, 0
            continue
        if x + p["w"] > 24:
            y, x, rowh = y + rowh, 0, 0
        targets = []
        for i, (expr, legend) in enumerate(p["targets"]):
            t = {"refId": chr(ord("A") + i), "expr": expr, "datasource": DS, "legendFormat": legend or "__auto",
                 "range": not p["table"], "instant": p["table"]}
            if p["table"]:
                t["format"] = "table"
            targets.append(t)
        defaults = {}
        if p["unit"]:
            defaults["unit"] = p["unit"]
        if p["min"] is not None:
            defaults["min"] = p["min"]
        if p["max"] is not None:
            defaults["max"] = p["max"]
        if p["kind"] == "status-history":  # a node × device grid over time, coloured by value
            defaults["color"] = {"mode": "continuous-GrYlRd"}
        q = {"id": pid, "type": p["kind"], "title": p["title"], "datasource": DS, "targets": targets,
             "gridPos": {"x": x, "y": y, "w": p["w"], "h": p["h"]},
             "fieldConfig": {"defaults": defaults, "overrides": []}, "options": {}}
        if p["description"]:
            q["description"] = p["description"]
        if p["table"]:
            q["transformations"] = [{"id": "merge", "options": {}}] if len(targets) > 1 else []
            q["options"] = {"showHeader": True}
        if p["empty_ok"]:
            # Read by tests/e2e/dashboards_test.sh: this panel may return no data there.
            q["description"] = (q.get("description", "") + " No data is normal when: " + p["empty_ok"] + ".").strip()
        out.append(q)
        pid, x, rowh = pid + 1, x + p["w"], max(rowh, p["h"])
    return {
        "uid": uid, "title": title, "tags": ["accelmon"], "editable": True, "graphTooltip": 1,
        "schemaVersion": 39, "version": 1, "timezone": "", "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"}, "timepicker": {},
        "templating": {"list": templating}, "annotations": {"list": []}, "panels": out,
        "links": [{"title": "accelmon dashboards", "type": "dashboards", "tags": ["accelmon"], "asDropdown": True,
                   "includeVars": True, "keepTime": True}],
        "__inputs": [], "description": "Generated by dashboards/generate.py; edit that, not this file.",
    }


# ---------------------------------------------------------------------------------------------
# Output.

SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./:-]*$")


def yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    if SAFE.match(v) and not re.match(r"^[0-9.]+$", v) and v not in ("true", "false", "null", "yes", "no", "on", "off"):
        return v
    return json.dumps(v, ensure_ascii=False)


def yaml_dump(v, indent=0):
    """Block-style YAML for dicts, lists and scalars (keys in the order given)."""
    pad = " " * indent
    lines = []
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, (dict, list)) and x:
                lines.append("%s%s:" % (pad, k))
                lines.append(yaml_dump(x, indent + 2))
            elif isinstance(x, (dict, list)):
                lines.append("%s%s: %s" % (pad, k, "{}" if isinstance(x, dict) else "[]"))
            else:
                lines.append("%s%s: %s" % (pad, k, yaml_scalar(x)))
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, (dict, list)) and x:
                inner = yaml_dump(x, indent + 2).split("\n")
                lines.append("%s- %s" % (pad, inner[0][indent + 2:]))
                lines.extend(inner[1:])
            else:
                lines.append("%s- %s" % (pad, yaml_scalar(x) if not isinstance(x, (dict, list)) else "{}"))
    return "\n".join(lines)


HEADER = "# Generated by dashboards/generate.py from its tables; edit that and re-run it, not this file.\n"


def files():
    out = {}
    for name, uid, title, variables, panels in DASHBOARDS:
        out["dashboards/grafana/%s.json" % name] = json.dumps(
            dashboard(uid, title, variables, panels), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    out["dashboards/prometheus/alerts.yml"] = HEADER + yaml_dump(alert_rules()) + "\n"
    out["dashboards/prometheus/recording.yml"] = HEADER + yaml_dump(recording_rules()) + "\n"
    out["dashboards/prometheus/jobs.yml"] = HEADER + yaml_dump(job_rules()) + "\n"
    out["dashboards/prometheus/tests/diagnosis_alerts_test.yml"] = HEADER + yaml_dump(diagnosis_alert_tests()) + "\n"
    out["deploy/kubernetes/prometheusrule.yaml"] = HEADER + yaml_dump(prometheus_rule()) + "\n"
    return out


def check_runbooks():
    path = os.path.join(REPO, "docs", "runbooks.md")
    with open(path, encoding="utf-8") as f:
        headings = {m.group(1).strip().lower() for m in re.finditer(r"^## (.+)$", f.read(), re.M)}
    names = [r[1] for r in DIAGNOSIS_RULES] + [a[0] for a in RAW_ALERTS] + [a[0] for a in JOB_ALERTS]
    missing = [n for n in names if n.lower() not in headings]
    if missing:
        sys.exit("docs/runbooks.md lacks a section (## Name) for: " + ", ".join(missing))


def list_queries(root):
    """Every query of every panel of the dashboards under root, as JSON lines."""
    for name, *_ in DASHBOARDS:
        with open(os.path.join(root, "dashboards/grafana/%s.json" % name), encoding="utf-8") as f:
            d = json.load(f)
        for p in d["panels"]:
            for t in p.get("targets", []):
                print(json.dumps({"dashboard": d["title"], "panel": p["title"], "expr": t["expr"],
                                  "empty_ok": "No data is normal when" in p.get("description", "")}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=REPO, help="output root (default: the repository)")
    ap.add_argument("--list-queries", action="store_true")
    args = ap.parse_args()
    if args.list_queries:
        list_queries(args.out)
        return
    check_runbooks()
    for rel, text in sorted(files().items()):
        path = os.path.join(args.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
