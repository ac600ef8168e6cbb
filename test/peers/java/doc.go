// Package java runs real Java Change Feed Processor hosts (azure-cosmos, the version pinned in
// pom.xml) beside cfp hosts on one lease set of a served `cfp emulator`, over TLS, and checks
// what they deliver, who owns the leases, and what the Java estimator and `cfp estimate` say.
//
// The Java host is src/main/java/dev/cfp/peer/Main.java, built by build.sh into one shaded jar
// (target/cfp-java-peer.jar) that the tests start with `java -cp`. The tests build it when the
// jar is missing or older than its sources. They are skipped when java or mvn is missing,
// except under CI=true, where that fails them:
//
//	./test/peers/java/build.sh && go test ./test/peers/java -v
//
// The package has no code of its own: everything is in its tests.
package java
