#!/usr/bin/env python3
"""An A3C worker written with torch.nn, training through Shesha against the C++ shesha-learner.

The model is an ordinary torch.nn.Module; its parameters, flattened in registration order
(torch.nn.utils.parameters_to_vector), are the wire layout the learner publishes and applies. This
one mirrors shesha-learner's bundled actor-critic (hidden tanh layers, a policy head, a value
head), so the learner's own evaluation measures it; any module works with a learner of your own
(docs/api.md).

    a3c_worker.py --config configs/cluster-cartpole.yaml --cluster 1 --worker-id 3 \\
        --learner 127.0.0.1 [--port P] [--bind IP] [--duration S] [--metrics FILE]

Exit status: 0 after --duration or SIGTERM, 2 for bad arguments or configuration.
"""
import argparse
import json
import os
import signal
import sys
import time

import numpy as np
import torch
import yaml

import shesha


class ActorCritic(torch.nn.Module):
    def __init__(self, observation_size, action_count, hidden=(64, 64), activation="tanh"):
        super().__init__()
        sizes = [observation_size, *hidden]
        self.hidden = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.policy = torch.nn.Linear(sizes[-1], action_count)
        self.value = torch.nn.Linear(sizes[-1], 1)
        self.activation = torch.tanh if activation == "tanh" else torch.relu

    def forward(self, x):
        for layer in self.hidden:
            x = self.activation(layer(x))
        return self.policy(x), self.value(x).squeeze(-1)


def a3c_loss(net, observations, actions, rewards, terminated, bootstrap_obs, gamma, entropy_beta, value_coef):
    logits, values = net(observations)
    with torch.no_grad():
        running = 0.0 if terminated else float(net(bootstrap_obs.unsqueeze(0))[1][0])
    returns = []
    for r in reversed(rewards):
        running = r + gamma * running
        returns.append(running)
    returns = torch.tensor(returns[::-1], dtype=torch.float32)
    advantages = returns - values.detach()
    log_probs_all = torch.log_softmax(logits, dim=1)
    log_probs = log_probs_all.gather(1, actions.unsqueeze(1)).squeeze(1)
    entropy = -(log_probs_all.exp() * log_probs_all).sum(1)
    policy_loss = -(log_probs * advantages).mean()
    value_loss = 0.5 * (returns - values).pow(2).mean()
    return policy_loss - entropy_beta * entropy.mean() + value_coef * value_loss


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--cluster", type=int, required=True)
    p.add_argument("--worker-id", type=int, required=True)
    p.add_argument("--learner", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--bind", default="0.0.0.0")
    p.add_argument("--duration", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--metrics", default=None)
    args = p.parse_args()

    try:
        with open(args.config) as f:
            cfg = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        print(f"a3c_worker: {args.config}: {e}", file=sys.stderr)
        return 2
    env_name = cfg["env"]
    model_cfg = cfg.get("model", {}) or {}
    a3c = cfg.get("a3c", {}) or {}
    worker_cfg = cfg.get("worker", {}) or {}
    n_steps = int(a3c.get("n_steps", 5))
    gamma = float(a3c.get("gamma", 0.99))
    entropy_beta = float(a3c.get("entropy", 0.01))
    value_coef = float(a3c.get("value_coef", 0.5))
    max_grad_norm = float(a3c.get("max_grad_norm", 0.5))
    max_updates = int(worker_cfg.get("max_updates_per_version", 0))

    torch.set_num_threads(1)
    seed = args.seed if args.seed is not None else int(cfg.get("seed", 1)) * 1000 + args.worker_id
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    try:
        env = shesha.Env(env_name)
    except shesha.Error as e:
        print(f"a3c_worker: {e}", file=sys.stderr)
        return 2
    if not env.discrete:
        print(f"a3c_worker: {env_name}: this example handles discrete actions only", file=sys.stderr)
        return 2
    net = ActorCritic(env.observation_size, env.action_count, tuple(model_cfg.get("hidden", [64, 64])),
                      model_cfg.get("activation", "tanh"))
    params = list(net.parameters())
    model_elems = sum(t.numel() for t in params)
    try:
        transport = shesha.Worker(args.config, args.cluster, args.worker_id, args.learner, model_elems,
                                  port=args.port, bind=args.bind)
    except shesha.Error as e:
        print(f"a3c_worker: {e}", file=sys.stderr)
        return 2

    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    print(f"a3c_worker {args.worker_id}: {env_name}, {model_elems} parameters, learner {args.learner}", flush=True)
    start = time.monotonic()
    obs = env.reset(int(rng.integers(1 << 62)))
    version = None
    updates_on_version = 0
    resends_seen = 0  # resends of the version held when the budget ran out (drl/update_budget.h)
    env_steps = episodes = updates = budget_refills = 0
    episode_return, returns = 0.0, []

    def write_metrics():
        # As shesha-worker: rewritten once a second and at exit, replaced whole (never half-written).
        if not args.metrics:
            return
        summary = {"worker_id": args.worker_id, "env_steps": env_steps, "episodes": episodes, "updates": updates,
                   "budget_refills": budget_refills,
                   "recent_mean_return": float(np.mean(returns)) if returns else 0.0,
                   "wall_seconds": time.monotonic() - start, "transport": transport.counters()}
        with open(args.metrics + ".tmp", "w") as f:
            json.dump(summary, f, indent=1)
        os.replace(args.metrics + ".tmp", args.metrics)
    next_write = start + 1.0
    while not stop and (args.duration <= 0 or time.monotonic() - start < args.duration):
        if time.monotonic() >= next_write:
            next_write += 1.0
            write_metrics()
        # The newest model, if any; wait for one when there is none yet or the per-version budget is spent.
        must_wait = version is None or (max_updates and updates_on_version >= max_updates)
        model = transport.wait_model(100) if must_wait else transport.take_model()
        if model is not None:
            version, flat = model
            torch.nn.utils.vector_to_parameters(torch.from_numpy(flat), params)
            updates_on_version = 0
        elif must_wait and version is not None:
            # The budget is spent and no newer version came. If the learner has sent this one again
            # since it ran out, the updates computed on it were lost or too few: compute another
            # budget's worth.
            resends = transport.counters()["model_resends"]
            if resends != resends_seen:
                resends_seen, updates_on_version = resends, 0
                budget_refills += 1
        if version is None or (max_updates and updates_on_version >= max_updates):
            continue
        observations, actions, rewards = [], [], []
        terminated = episode_over = False
        while len(rewards) < n_steps and not episode_over:
            x = torch.from_numpy(obs)
            with torch.no_grad():
                logits, _ = net(x.unsqueeze(0))
            probs = torch.softmax(logits[0].double(), 0).numpy()
            action = int(rng.choice(len(probs), p=probs / probs.sum()))
            next_obs, reward, terminated, truncated = env.step(action)
            observations.append(x)
            actions.append(action)
            rewards.append(reward)
            episode_return += reward
            env_steps += 1
            obs = next_obs
            if terminated or truncated:
                episode_over = True
                episodes += 1
                returns = (returns + [episode_return])[-20:]
                episode_return = 0.0
        bootstrap = torch.from_numpy(obs)
        if episode_over:
            obs = env.reset()
        net.zero_grad()
        loss = a3c_loss(net, torch.stack(observations), torch.tensor(actions), rewards, terminated, bootstrap,
                        gamma, entropy_beta, value_coef)
        loss.backward()
        if max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        gradient = torch.nn.utils.parameters_to_vector([t.grad for t in params])
        transport.send(version, gradient.numpy(), env_steps=env_steps)  # float32, contiguous: not copied
        updates += 1
        updates_on_version += 1
        if max_updates and updates_on_version == max_updates:
            resends_seen = transport.counters()["model_resends"]
    c = transport.counters()
    write_metrics()
    print(f"a3c_worker {args.worker_id}: {env_steps} env steps, {episodes} episodes, {updates} updates, "
          f"{c['chunks_sent']} chunks sent, model version {c['model_version']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
