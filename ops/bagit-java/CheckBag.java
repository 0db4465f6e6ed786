// A second BagIt implementation reads an evidence package: the Library of Congress's bagit-java 5.2.0
// reads the bag and verifies it (completeness, every manifest, every checksum). Prints "valid: PATH"
// and exits 0, or "INVALID: <exception>: <message>" and exits 1. Compiled by tests/integration/test_bagit_java.py.
import gov.loc.repository.bagit.domain.Bag;
import gov.loc.repository.bagit.reader.BagReader;
import gov.loc.repository.bagit.verify.BagVerifier;
import java.nio.file.Paths;

public class CheckBag {
    public static void main(String[] args) throws Exception {
        try (BagVerifier verifier = new BagVerifier()) {
            Bag bag = new BagReader().read(Paths.get(args[0]));
            verifier.isValid(bag, false);
            System.out.println("valid: " + args[0]);
        } catch (Exception e) {
            System.out.println("INVALID: " + e.getClass().getSimpleName() + ": " + e.getMessage());
            System.exit(1);
        }
    }
}
