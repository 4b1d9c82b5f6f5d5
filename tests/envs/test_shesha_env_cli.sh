#!/usr/bin/env bash
# End-to-end checks of the shesha-env CLI: exact CSV for known trajectories (expected rows made by
# tests/envs/gym_reference.py), seeded resets, the benchmark mode, and exit status 2 with a message
# for every kind of bad input.
# Usage: test_shesha_env_cli.sh PATH/TO/shesha-env
set -u
cli="$1"
failures=0
checks=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_output() {  # name, expected stdout, command args...
    local name="$1" expected="$2"; shift 2
    checks=$((checks + 1))
    local got
    got="$("$cli" "$@")" || { fail "$name: exit status $?"; return; }
    if [ "$got" != "$expected" ]; then
        fail "$name: output differs"; diff <(echo "$expected") <(echo "$got")
    fi
}

expect_usage_error() {  # name, message fragment, command args...
    local name="$1" fragment="$2"; shift 2
    checks=$((checks + 1))
    local err status
    err="$("$cli" "$@" 2>&1 >/dev/null)"; status=$?
    [ "$status" -eq 2 ] || fail "$name: exit status $status, expected 2"
    [[ "$err" == *"$fragment"* ]] || fail "$name: message '$err' lacks '$fragment'"
}

expect_output "CartPole from a state" "step,x,x_dot,theta,theta_dot,reward,terminated,truncated
0,0.00999999978,0.0199999996,-0.0299999993,0.0399999991,0,0,0
1,0.0104,-0.17467919,-0.0292000007,0.323068708,1,0,0
2,0.00690641627,0.020846121,-0.0227386262,0.0213221889,1,0,0
3,0.00732333865,0.216286659,-0.0223121811,-0.278447419,1,0,0
4,0.0116490722,0.0214900002,-0.0278811306,0.00711560855,1,0,0" \
    --env CartPole-v1 --state 0.01,0.02,-0.03,0.04 --actions 0,1,1,0

expect_output "Acrobot from a state" "step,cos_theta1,sin_theta1,cos_theta2,sin_theta2,theta1_dot,theta2_dot,reward,terminated,truncated
0,0.995004177,0.099833414,0.980066597,-0.198669329,0.300000012,-0.400000006,0,0,0
1,0.988099694,0.153814986,0.961144269,-0.276046634,0.231027454,-0.375331759,-1,0,0
2,0.986947954,0.16103971,0.962451696,-0.271452993,-0.158808768,0.42257005,-1,0,0
3,0.994253933,0.107047208,0.988547921,-0.150907293,-0.371525466,0.782946885,-1,0,0" \
    --env Acrobot-v1 --state 0.1,-0.2,0.3,-0.4 --actions 0,2,1

expect_output "MountainCarContinuous from a state" "step,position,velocity,reward,terminated,truncated
0,-0.5,0.00999999978,0,0,0
1,-0.489426851,0.0105731571,-0.025000000000000001,0,0
2,-0.480609536,0.00881731603,-0.10000000000000001,0,0
3,-0.470613748,0.0099957902,-0.10000000000000001,0,0
4,-0.460638672,0.00997507386,-0.0062500000000000003,0,0" \
    --env MountainCarContinuous-v0 --state=-0.5,0.01 --actions=0.5,-1,1,0.25

# Out-of-range continuous actions are accepted and clipped inside step(), as Gymnasium does (rows
# from tests/envs/gym_reference.py csv, which redoes Gymnasium's step functions in NumPy).
# MountainCarContinuous charges the unclipped action in its reward.
expect_output "Pendulum clips out-of-range torques" "step,cos_theta,sin_theta,theta_dot,reward,terminated,truncated
0,0.955336511,0.295520216,-1.20000005,0,0,0
1,0.964808524,0.262953341,-0.678359866,-0.23799999999999988,0,0
2,0.974340379,0.225079641,-0.781144857,-0.12081684277954922,0,0
3,0.980035186,0.198824182,-0.537335098,-0.11280896914867239,0,0
4,0.986295342,0.164989308,-0.688216984,-0.072936130913003952,0,0
5,0.988390863,0.151932731,-0.264474988,-0.078836380842998544,0,0" \
    --env Pendulum-v1 --state=0.3,-1.2 --actions=2.5,-7,0.5,-2.0000001,100

expect_output "MountainCarContinuous clips the force, not the action cost" "step,position,velocity,reward,terminated,truncated
0,-0.5,0.00999999978,0,0,0
1,-0.488676846,0.0113231568,-0.90000000000000002,0,0
2,-0.479115129,0.00956172124,-0.22500000000000001,0,0
3,-0.469511032,0.00960408337,-0.0062500000000000003,0,0
4,-0.461810827,0.00770020299,-160,0,0" \
    --env MountainCarContinuous-v0 --state=-0.5,0.01 --actions=3,-1.5,0.25,-40

expect_output "no actions: the starting row only" "step,position,velocity,reward,terminated,truncated
0,-0.5,0,0,0,0" --env MountainCar-v0 --state=-0.5,0

# Seeded resets: the same seed and worker give the same rows; another worker id does not.
checks=$((checks + 1))
a="$("$cli" --env Pendulum-v1 --seed 11 --worker-id 2 --actions 0.5,-1.5,2)"
b="$("$cli" --env Pendulum-v1 --seed 11 --worker-id 2 --actions 0.5,-1.5,2)"
c="$("$cli" --env Pendulum-v1 --seed 11 --worker-id 3 --actions 0.5,-1.5,2)"
[ -n "$a" ] && [ "$a" == "$b" ] || fail "seeded reset is not reproducible"
[ "$a" != "$c" ] || fail "worker ids 2 and 3 gave the same trajectory"
[ "$(echo "$a" | wc -l)" -eq 5 ] || fail "seeded run: expected header and 4 rows"

checks=$((checks + 1))
[ "$("$cli" --list | wc -l)" -eq 5 ] || fail "--list: expected 5 environments"

checks=$((checks + 1))
bench="$("$cli" --bench --bench-steps 2000 --bench-seconds 5)" || fail "--bench failed"
[ "$(echo "$bench" | head -1)" == "env,steps,episodes,seconds,steps_per_second" ] || fail "--bench header"
[ "$(echo "$bench" | grep -c ',2000,')" -eq 5 ] || fail "--bench: expected 2000 steps for each of 5 environments: $bench"

expect_usage_error "unknown env" "unknown environment 'Foo-v0'" --env Foo-v0 --state 0,0
expect_usage_error "missing env" "--env is required" --state 0,0
expect_usage_error "short state" "takes 4 comma-separated values, got 3" --env CartPole-v1 --state 0,0,0
expect_usage_error "long state" "takes 2 comma-separated values, got 3" --env Pendulum-v1 --state 0,0,0
expect_usage_error "state not a number" "'abc' is not a finite number" --env CartPole-v1 --state 0,abc,0,0
expect_usage_error "state nan" "'nan' is not a finite number" --env Pendulum-v1 --state nan,0
expect_usage_error "discrete out of range" "out of range: CartPole-v1 takes 0..1" --env CartPole-v1 --state 0,0,0,0 --actions 0,1,2
expect_usage_error "discrete negative" "out of range" --env Acrobot-v1 --state 0,0,0,0 --actions=-1
expect_usage_error "discrete not an integer" "is not an integer" --env MountainCar-v0 --state=-0.5,0 --actions 1.5
expect_usage_error "empty action" "is not an integer" --env MountainCar-v0 --state=-0.5,0 --actions 1,,1
expect_usage_error "continuous beyond float32" "action 2 ('1e39') does not fit a float32" --env Pendulum-v1 --state 0,0 --actions 0.5,1e39
expect_usage_error "continuous not a number" "is not a finite number" --env MountainCarContinuous-v0 --state=-0.5,0 --actions x
expect_usage_error "state and seed" "exactly one of --state and --seed" --env Pendulum-v1 --state 0,0 --seed 1
expect_usage_error "neither state nor seed" "exactly one of --state and --seed" --env Pendulum-v1
expect_usage_error "bad seed" "--seed" --env Pendulum-v1 --seed abc
expect_usage_error "unknown option" "--bogus" --bogus

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
