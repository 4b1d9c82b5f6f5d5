#!/usr/bin/env python3
"""Checks for tests/prometheus/test_prometheus_textfile.sh: scrape a node_exporter and compare the
shesha metrics with the stats JSON (switch) or learner.json (learner).

  prom_check.py wait URL SECONDS                     until URL answers 200
  prom_check.py value URL NAME LABELS_JSON           print one sample's value ("" if absent)
  prom_check.py switch URL STATS_JSON SWITCH_NAME    every JSON counter equals its metric
  prom_check.py learner URL LEARNER_JSON CLUSTER     learner metrics equal learner.json
Exit status 0 when every check passed; each check prints one line.
"""
import json
import re
import sys
import time
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def parse(text):
    """{name: [(labels dict, value float, raw text)]}, {name: type}."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            _, _, name, kind = line.split(' ', 3)
            types[name] = kind
            continue
        if not line or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f'unparsable line: {line!r}')
        labels = dict(LABEL.findall(m.group(3) or ''))
        samples.setdefault(m.group(1), []).append((labels, float(m.group(4)), m.group(4)))
    return samples, types


class Checker:
    def __init__(self):
        self.failures = 0
        self.passed = 0

    def check(self, desc, ok):
        if ok:
            self.passed += 1
        else:
            self.failures += 1
            print(f'FAIL: {desc}')

    def find(self, samples, name, labels):
        hits = [s for s in samples.get(name, []) if all(s[0].get(k) == v for k, v in labels.items())]
        return hits


def wait(url, seconds):
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        try:
            scrape(url)
            return 0
        except Exception:
            time.sleep(0.05)
    print(f'{url} did not answer within {seconds} s')
    return 1


def value(url, name, labels_json):
    samples, _ = parse(scrape(url))
    want = json.loads(labels_json)
    hits = [s for s in samples.get(name, []) if all(s[0].get(k) == v for k, v in want.items())]
    print(hits[0][2] if len(hits) == 1 else '')
    return 0


def common_checks(c, samples, types):
    # node_exporter read every *.prom file without complaint.
    errs = samples.get('node_textfile_scrape_error', [])
    c.check(f'node_textfile_scrape_error == 0 ({[e[1] for e in errs]})', len(errs) == 1 and errs[0][1] == 0)
    for name, kind in types.items():
        if name.startswith('shesha_'):
            c.check(f'{name}: counters end in _total, others do not ({kind})',
                    (kind == 'counter') == name.endswith('_total'))


def switch(url, stats_path, switch_name):
    c = Checker()
    samples, types = parse(scrape(url))
    s = json.load(open(stats_path))
    common_checks(c, samples, types)
    compared = 0

    def expect(section, key, val, labels, exact=True):
        nonlocal compared
        base = f'shesha_{section}' if key == 'total' else f'shesha_{section}_{key}'
        names = [n for n in (base, base + '_total') if n in samples]
        hits = [h for n in names for h in c.find(samples, n, labels)]
        desc = f'{base}{labels} = {val}'
        if len(hits) != 1:
            c.check(f'{desc}: {len(hits)} samples found', False)
            return
        got = hits[0][1]
        if isinstance(val, bool):
            val = int(val)
        ok = got == val if exact else abs(got - val) <= 5e-4 + 1e-9 * abs(val)
        c.check(f'{desc}: metric says {hits[0][2]}', ok)
        compared += 1

    sw = {'switch': switch_name}
    expect('switch', 'uptime_seconds', s['uptime_s'], sw, exact=False)
    for k in ('tsc_hz', 'lcores'):
        expect('switch', k, s[k], sw)
    expect('switch', 'aggregation_enabled', s['aggregation'], sw)
    expect('switch', 'feedback_enabled', s['feedback_enabled'], sw)
    info = c.find(samples, 'shesha_switch_info', sw)
    c.check('shesha_switch_info carries simd', len(info) == 1 and info[0][0].get('simd') == s['simd'])
    for p in s['ports']:
        pl = {'switch': switch_name, 'port': p['name']}
        pinfo = c.find(samples, 'shesha_port_info', pl)
        c.check(f'shesha_port_info{pl} has device and port_id',
                len(pinfo) == 1 and pinfo[0][0].get('device') == p['device']
                and pinfo[0][0].get('port_id') == str(p['port_id']))
        for k, v in p.items():
            if k in ('name', 'device', 'port_id', 'queue'):
                continue
            expect('port', k, v, pl)
        for k, v in p['queue'].items():
            expect('queue', k, v, pl, exact=isinstance(v, int))
    for section in ('frames', 'malformed', 'gradients', 'feedback', 'fdb', 'internal'):
        for k, v in s[section].items():
            expect(section, k, v, sw)
    # The values are the ones of a real run, not zeros.
    rx = [h[1] for h in samples.get('shesha_port_rx_packets_total', [])]
    c.check(f'rx_packets > 0 on every port ({rx})', len(rx) == len(s['ports']) and all(v > 0 for v in rx))
    gauges = [n for n, t in types.items() if n.startswith('shesha_queue_depth') and t == 'gauge']
    c.check(f'queue depth is a gauge ({gauges})', 'shesha_queue_depth' in gauges)
    print(f'switch: {compared} JSON values compared with their metrics, {c.failures} failure(s)')
    return 1 if c.failures or compared < 60 else 0


def learner(url, learner_json, cluster):
    c = Checker()
    samples, types = parse(scrape(url))
    j = json.load(open(learner_json))
    common_checks(c, samples, types)
    cl = {'cluster': cluster}

    def one(name, labels=None):
        hits = c.find(samples, name, labels or cl)
        return hits[0][1] if len(hits) == 1 else None

    pairs = [
        ('shesha_learner_version', j['version']),
        ('shesha_learner_chunks_received_total', j['chunks']['received']),
        ('shesha_learner_chunks_applied_total', j['chunks']['applied']),
        ('shesha_learner_contributions_total', j['chunks']['contributions']),
        ('shesha_learner_optimizer_steps_total', j['chunks']['optimizer_steps']),
        ('shesha_learner_merged_chunks_total', j['chunks']['merged']),
        ('shesha_learner_staleness_samples_total', j['staleness']['count']),
        ('shesha_learner_staleness_max', j['staleness']['max']),
        ('shesha_learner_evaluations_total', j['eval']['count']),
        ('shesha_learner_versions_published_total', j['model']['versions_published']),
        ('shesha_learner_credit_units_total', j['credits']['units']),
        ('shesha_learner_workers_known', j['workers']['known']),
        ('shesha_learner_env_steps_total', j['env_steps']),
        ('shesha_learner_datagrams_total', j['datagrams']),
        ('shesha_learner_chunks_clipped_total', j['chunks']['clipped']),
        ('shesha_learner_not_admitted_total', j['not_admitted']),
        ('shesha_learner_models_withheld_total', j['model']['withheld']),
        ('shesha_learner_model_group_sends_total', j['model']['group_sends']),
        ('shesha_learner_model_group_chunks_sent_total', j['model']['group_chunks_sent']),
        ('shesha_learner_model_group_withheld_total', j['model']['group_withheld']),
        ('shesha_learner_model_copies_owed_total', j['model']['copies_owed']),
        ('shesha_learner_model_copies_sent_total', j['model']['copies_sent']),
        ('shesha_learner_model_sends_deferred_total', j['model']['sends_deferred']),
    ]
    for name, want in pairs:
        got = one(name)
        c.check(f'{name} = {want} (metric {got})', got == want)
    for reason, want in j['chunks']['rejected'].items():
        got = one('shesha_learner_chunks_rejected_total', {'cluster': cluster, 'reason': reason})
        c.check(f'rejected{{reason={reason}}} = {want} (metric {got})', got == want)
    got = one('shesha_learner_staleness_mean')
    c.check(f'staleness mean {got} ~ {j["staleness"]["mean"]}',
            got is not None and abs(got - j['staleness']['mean']) <= 1e-6 + 1e-6 * abs(got))
    got = one('shesha_learner_eval_mean_return')
    c.check(f'last eval mean {got} ~ {j["eval"]["last_mean_return"]}',
            got is not None and abs(got - j['eval']['last_mean_return']) < 1e-6)
    # AoM: the textfile is written a moment after learner.json, so the time-average may move a little.
    mean_s, peak_s, now_s = (one('shesha_learner_aom_mean_seconds'), one('shesha_learner_aom_peak_seconds'),
                             one('shesha_learner_aom_seconds'))
    want = j['aom']['mean_ms'] / 1000
    c.check(f'AoM mean {mean_s} s ~ {want} s',
            mean_s is not None and mean_s > 0 and abs(mean_s - want) <= 0.002 + 0.05 * want)
    c.check(f'AoM 0 < mean {mean_s} <= peak {peak_s}; current {now_s} present',
            None not in (mean_s, peak_s, now_s) and 0 < mean_s <= peak_s and now_s > 0)
    c.check('applied > 0 (a real run)', (one('shesha_learner_chunks_applied_total') or 0) > 0)
    print(f'learner: {c.passed} checks passed, {c.failures} failure(s)')
    return 1 if c.failures else 0


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    sys.exit({'wait': wait, 'value': value, 'switch': switch, 'learner': learner}[cmd](*args))
