#!/usr/bin/env bash
# Builds the Java Change Feed Processor host of test/peers/java (target/cfp-java-peer.jar, one
# shaded jar: the Go tests start it with `java -cp`) from the pinned pom.xml. Maven fetches
# azure-cosmos and the plugins once into ~/.m2; later builds need no network.
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
mvn -q -B -Dstyle.color=never package -DskipTests
echo "test/peers/java: built target/cfp-java-peer.jar in $((SECONDS - start))s" >&2
