#!/usr/bin/env bash
# Set up skillsynth on a fresh machine and run the main job on a shipped corpus with the
# embedded default models: import the real tau-bench airline trajectories, show what the corpus
# holds, run one synthesis pass (detect, cluster, distill, reconcile), list the procedures and
# export them as SKILL.md files. It grows into the end-to-end KPI run (4th-attempt protocol,
# KPIs with intervals) with the evaluation issue. Output: eval/results/main/ (or $1).
set -euo pipefail
. "$(dirname "$0")/_venv.sh" notebooks
OUT="${1:-$ROOT/eval/results/main}"
DB="$OUT/taubench-airline.db"
mkdir -p "$OUT"
rm -f "$DB" "$DB-wal" "$DB-shm" "$DB.labels.sqlite"   # this job's own files only
rm -rf "$OUT/skills"
skillsynth models prepare
skillsynth models status
skillsynth corpus import --format taubench \
  "$ROOT/datasets/taubench-airline-gpt4o/gpt-4o-airline.json.gz" "$DB"
skillsynth corpus stats "$DB" | tee "$OUT/corpus-stats.txt"
# tau 0.8: MiniLM's scale (GAIA's 0.82 is for its 768-d embedder); json mode bounds the
# embedded 135M model's answers.
skillsynth synthesize "$DB" --mode json --set similarity_tau=0.8 --json > "$OUT/pass-report.json"
python -c 'import json,sys; r=json.load(open(sys.argv[1])); print({k: r[k] for k in ("status","sessions","clusters","qualified","distilled","added","updated","noop","llm_calls")})' "$OUT/pass-report.json"
skillsynth procedures list "$DB" | tee "$OUT/procedures.txt"
skillsynth procedures list "$DB" --json \
  | python -c 'import json,sys; [print(p["id"]) for p in json.load(sys.stdin)]' \
  | while read -r id; do skillsynth procedures export "$DB" "$id" --out "$OUT/skills/$id"; done
for dir in "$OUT"/skills/*/*/; do   # each exported skill, re-read by both validators
  skillsynth skill validate "$dir" --profile agentskills
  skillsynth skill validate "$dir" --profile gaia691
done
echo "main job done: $OUT"
